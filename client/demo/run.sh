#!/usr/bin/env bash
# The PIX-status scenario, from a fresh Debian machine with Rust: installs what is missing
# (Debian's redis-server, redis-tools and libclang-dev, with sudo when not root), builds the
# module and the demo in release (client/demo-support/run-demo.sh), and runs the demo
# (`pix-demo`), which starts a private Redis with the module on a loopback port (without it
# for `--backend script`), a mock API and two replica processes, and stops all of them when it
# ends, also on Ctrl-C or failure (and the Redis even if the demo is killed outright).
# Arguments go to the demo, e.g. `client/demo/run.sh --upstream-mode window` (a 429 pauses the
# fleet) or `client/demo/run.sh --backend script` (no module); `--help` lists them.
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/../demo-support/run-demo.sh" pix-demo "$@"
