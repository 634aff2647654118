#!/usr/bin/env bash
# The ingestion scenario (the Rate Limiting pattern), from a fresh Debian machine with Rust:
#   1. installs what is missing: redis-server + redis-tools (Redis 7.0) and libclang-dev (the
#      module's build runs bindgen), with sudo when not root, without leaving Debian's Redis
#      service running (tests/install-servers.sh --apt-only);
#   2. builds the module and the demo in release;
#   3. runs the demo (`ingest-demo`), which starts a private Redis with the module on a
#      loopback port, a mock database and 3 worker processes per phase, and stops all of them
#      when it ends, also on Ctrl-C or failure (and the Redis even if the demo is killed
#      outright).
# Arguments go to the demo, e.g. `client/ingest-demo/run.sh --json`; `--help` lists them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

log() { printf 'run.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v cargo >/dev/null || die "cargo is not installed: install Rust first (rustup.rs)"

tests/install-servers.sh --apt-only

log "building the module (release)"
cargo build --release -p redis-throttle-module
target="${CARGO_TARGET_DIR:-target}"
module="$(cd "$target/release" && pwd)/libredis_throttle_module.so"
[ -f "$module" ] || die "the build did not produce $module"

log "building the demo (release)"
cargo build --release -p ingest-demo --bin ingest-demo
export THROTTLE_MODULE="$module"
# exec: cargo in turn execs the demo, so Ctrl-C reaches it directly and it stops what it started.
exec cargo run --release -q -p ingest-demo --bin ingest-demo -- "$@"
