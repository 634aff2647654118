#!/usr/bin/env bash
# The ingestion scenario (the Rate Limiting pattern), from a fresh Debian machine with Rust:
# installs what is missing (Debian's redis-server, redis-tools and libclang-dev, with sudo when
# not root), builds the module and the demo in release (client/demo-support/run-demo.sh), and
# runs the demo (`ingest-demo`), which starts a private Redis with the module on a loopback
# port, a mock database and 3 worker processes per phase, and stops all of them when it ends,
# also on Ctrl-C or failure (and the Redis even if the demo is killed outright).
# Arguments go to the demo, e.g. `client/ingest-demo/run.sh --json`; `--help` lists them.
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/../demo-support/run-demo.sh" ingest-demo "$@"
