#!/usr/bin/env bash
# What both demos' run.sh do, from a fresh Debian machine with Rust:
#   1. installs what is missing: redis-server + redis-tools (Redis 7.0) and libclang-dev (the
#      module's build runs bindgen), with sudo when not root, without leaving Debian's Redis
#      service running (tests/install-servers.sh --apt-only);
#   2. builds the module and the demo in release;
#   3. runs the demo with the arguments after its name (the package's and its binary's).
# Usage: client/demo-support/run-demo.sh DEMO [ARGUMENTS FOR THE DEMO...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

log() { printf 'run.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$#" -ge 1 ] || die "usage: $0 DEMO [ARGUMENTS FOR THE DEMO...]"
demo="$1"
shift

command -v cargo >/dev/null || die "cargo is not installed: install Rust first (rustup.rs)"

tests/install-servers.sh --apt-only

log "building the module (release)"
cargo build --release -p redis-throttle-module
target="${CARGO_TARGET_DIR:-target}"
module="$(cd "$target/release" && pwd)/libredis_throttle_module.so"
[ -f "$module" ] || die "the build did not produce $module"

log "building the demo (release)"
cargo build --release -p "$demo" --bin "$demo"
export THROTTLE_MODULE="$module"
# exec: cargo in turn execs the demo, so Ctrl-C reaches it directly and it stops what it started.
exec cargo run --release -q -p "$demo" --bin "$demo" -- "$@"
