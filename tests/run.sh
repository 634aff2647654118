#!/usr/bin/env bash
# Installs the servers, builds the module the end-to-end tests load, and runs every test.
# Extra arguments go to `cargo test`, e.g. `tests/run.sh -- --nocapture`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tests/install-servers.sh
# The e2e tests load target/debug/libredis_throttle.so; `cargo test` alone does not build a cdylib.
cargo build -p redis-throttle-module
cargo test --workspace "$@"
