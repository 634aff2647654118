#!/usr/bin/env bash
# The PIX-status scenario, from a fresh Debian machine with Rust:
#   1. installs what is missing: redis-server + redis-tools (Redis 7.0) and libclang-dev (the
#      module's build runs bindgen), with sudo when not root, without starting Debian's
#      Redis service;
#   2. builds the module in release;
#   3. runs the demo (`pix-demo`), which starts a private Redis with the module on a loopback
#      port, a mock API and two replica processes, and stops all of them when it ends, also
#      on Ctrl-C or failure (and the Redis even if the demo is killed outright).
# Arguments go to the demo, e.g. `client/demo/run.sh --upstream-mode window`; `--help` lists them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

log() { printf 'run.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v cargo >/dev/null || die "cargo is not installed: install Rust first (rustup.rs)"

APT_PACKAGES=(redis-server redis-tools libclang-dev)

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

install_missing() {
    if ! command -v dpkg-query >/dev/null; then
        command -v redis-server >/dev/null \
            || die "not a Debian system: install Redis 7 (redis-server) and libclang, then run again"
        return
    fi
    local missing=() pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        installed "$pkg" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || die "need root or sudo to apt-get install ${missing[*]}"
        sudo=(sudo)
    fi
    log "apt-get install ${missing[*]}"
    # Keep the package from starting a redis-server on 6379 (101 = action forbidden),
    # unless the machine already has such a policy; the demo starts its own.
    local policy=/usr/sbin/policy-rc.d added_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod 755 "$policy"
        added_policy=1
    fi
    local status=0
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q || status=$?
    if [ "$status" -eq 0 ]; then
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends "${missing[@]}" || status=$?
    fi
    if [ -n "$added_policy" ]; then
        "${sudo[@]}" rm -f "$policy"
    fi
    [ "$status" -eq 0 ] || die "apt-get failed (exit $status)"
    # Installed just now for the demo: do not leave it starting at boot either.
    if [[ " ${missing[*]} " == *" redis-server "* ]] && [ -d /run/systemd/system ]; then
        "${sudo[@]}" systemctl disable redis-server >/dev/null 2>&1 || true
    fi
}

install_missing

log "building the module (release)"
cargo build --release -p redis-throttle-module
target="${CARGO_TARGET_DIR:-target}"
module="$(cd "$target/release" && pwd)/libredis_throttle.so"
[ -f "$module" ] || die "the build did not produce $module"

log "building the demo (release)"
cargo build --release -p throttle-demo --bin pix-demo
export THROTTLE_MODULE="$module"
# exec: cargo in turn execs the demo, so Ctrl-C reaches it directly and it stops what it started.
exec cargo run --release -q -p throttle-demo --bin pix-demo -- "$@"
