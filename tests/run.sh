#!/usr/bin/env bash
# Installs the servers, builds the module the end-to-end tests load, and runs every test.
# Extra arguments go to `cargo test`, e.g. `tests/run.sh -- --nocapture`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tests/install-servers.sh
# libfaketime leaves per-pid files in /dev/shm when a faked server is killed, and a new process
# with the same pid then fails to start: drop those whose process is gone (the kit also cleans
# up after its own servers).
for f in /dev/shm/sem.faketime_sem_* /dev/shm/faketime_shm_*; do
    [ -e "$f" ] || continue
    kill -0 "${f##*_}" 2>/dev/null || rm -f "$f"
done
# The e2e tests load target/debug/libredis_throttle_module.so; `cargo test` alone does not build a cdylib.
cargo build -p redis-throttle-module
# --no-fail-fast, and both runs whatever the first gave: one failure must not hide the others.
status=0
# The README snippets' own crate is left to its line below: its redis-throttle has every
# feature, which would otherwise be the whole workspace's.
cargo test --workspace --exclude throttle-readme-user --no-fail-fast "$@" || status=$?
# The client's optional features: `metrics` (the facade test), `tower` and `reqwest` (the HTTP
# layers); not --workspace, which would also switch on redis-module's API-level features.
cargo test -p redis-throttle --all-features --no-fail-fast --lib \
    --test metrics_facade --test http_tower --test http_reqwest "$@" || status=$?
cargo test -p redis-throttle --all-features --doc "$@" || status=$?
# The same READMEs' snippets in a crate with redis-throttle and no redis of its own, as a user's.
cargo test -p throttle-readme-user --doc "$@" || status=$?
exit "$status"
