#!/usr/bin/env bash
# Installs the servers, builds the module the end-to-end tests load, and runs every test.
# Extra arguments go to `cargo test`, e.g. `tests/run.sh -- --nocapture`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tests/install-servers.sh
# The e2e tests load target/debug/libredis_throttle.so; `cargo test` alone does not build a cdylib.
cargo build -p redis-throttle-module
cargo test --workspace "$@"
# The client's optional `metrics` feature (the facade test needs it); not --workspace, which
# would also switch on redis-module's API-level features.
cargo test -p redis-throttle --all-features --lib --test metrics_facade "$@"
