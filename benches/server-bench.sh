#!/usr/bin/env bash
# The side-by-side server benchmarks in one command (README, "Benchmarks"):
#   benches/server-bench.sh            # full run, ~10 min: throughput, memory, callgrind
#   benches/server-bench.sh --quick    # smoke run, ~1-2 min
#   benches/server-bench.sh --help     # options (--server, --only, --reps, ...)
#   benches/server-bench.sh --only throughput --redis-cell PATH/libredis_cell.so
#                                      # also redis-cell's CL.THROTTLE, from a module you built
#                                      # yourself (README, "Benchmarks"); nothing here fetches it
# Installs what is missing (redis-tools, the test servers, valgrind), builds the module and the
# driver in release, and runs the driver against a private server on a loopback port. Results
# are printed and written to target/server-bench/<server>/results.md.
set -euo pipefail
# A relative --redis-cell path is relative to where this was started, not to the workspace.
args=()
while [ $# -gt 0 ]; do
    if [ "$1" = --redis-cell ] && [ $# -gt 1 ] && [ -n "$2" ]; then
        args+=("$1" "$(realpath -- "$2")")
        shift 2
    else
        args+=("$1")
        shift
    fi
done
set -- ${args[@]+"${args[@]}"}
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tests/install-servers.sh
if ! command -v valgrind >/dev/null; then
    SUDO=(); [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends valgrind \
        || echo "server-bench: valgrind not installed; the callgrind section is skipped" >&2
fi
cargo build --release -p redis-throttle-module
cargo build --release -p throttle-benches --bin server-bench
# The library just built, for every server of the run (also if sources change meanwhile).
export THROTTLE_MODULE="${THROTTLE_MODULE:-$PWD/target/release/libredis_throttle_module.so}"
exec target/release/server-bench "$@"
