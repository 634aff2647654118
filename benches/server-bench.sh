#!/usr/bin/env bash
# The side-by-side server benchmarks in one command (README, "Benchmarks"):
#   benches/server-bench.sh            # full run, ~10 min: throughput, memory, callgrind
#   benches/server-bench.sh --quick    # smoke run, ~1-2 min
#   benches/server-bench.sh --help     # options (--server, --only, --reps, ...)
#   benches/server-bench.sh --only throughput --redis-cell PATH/libredis_cell.so
#                                      # also redis-cell's CL.THROTTLE, from a module you built
#                                      # yourself (README, "Benchmarks"); nothing here fetches it
#   benches/server-bench.sh --only throughput --baseline-module PATH/libredis_throttle_module.so
#                                      # THROTTLE.TAKE also on a second server with an earlier
#                                      # build of the module, ratios new/baseline (throughput,
#                                      # memory, callgrind); build that one yourself, e.g.
#                                      #   mkdir /tmp/baseline-src
#                                      #   git -C . archive <commit> | tar -x -C /tmp/baseline-src
#                                      #   (cd /tmp/baseline-src && CARGO_TARGET_DIR=/tmp/baseline-target \
#                                      #     cargo build --release -p redis-throttle-module)
# The throughput and callgrind sections put INCR, THROTTLE.TAKE, the hand-written token bucket
# script (benches/lua/hand_written_bucket.lua), the function library (FCALL throttle_take) and
# the EVALSHA twin side by side.
# Installs what is missing (redis-tools, the test servers, valgrind), builds the module and the
# driver in release, and runs the driver against a private server on a loopback port. Results
# are printed and written to target/server-bench/<server>/results.md.
set -euo pipefail
# A relative --redis-cell or --baseline-module path is relative to where this was started, not
# to the workspace.
args=()
while [ $# -gt 0 ]; do
    if { [ "$1" = --redis-cell ] || [ "$1" = --baseline-module ]; } && [ $# -gt 1 ] && [ -n "$2" ]; then
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
