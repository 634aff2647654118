#!/usr/bin/env bash
# Builds the module, starts a private Redis with it on a loopback port, shows a few
# THROTTLE.TAKE calls (the seed scenario: burst 8, 9 per second), and stops Redis again,
# also on Ctrl-C or failure.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null 2>&1; }
if ! need redis-server || ! need redis-cli || ! [ -e /usr/lib/llvm-14/lib/libclang.so ] && ! ldconfig -p | grep -q libclang; then
    echo "Installing redis-server, redis-tools and libclang-dev (needed to build and run the module)..."
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools libclang-dev >/dev/null
fi

cargo build --release -p redis-throttle-module
module="$PWD/target/release/libredis_throttle_module.so"
dir="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
redis-server --port "$port" --bind 127.0.0.1 --save "" --dir "$dir" --daemonize no \
    --loadmodule "$module" --logfile "$dir/redis.log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT INT TERM

cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 100); do cli PING >/dev/null 2>&1 && break; sleep 0.05; done
cli PING >/dev/null || { cat "$dir/redis.log"; exit 1; }

echo "Redis $(cli INFO server | sed -n 's/^redis_version:\(.*\)\r$/\1/p') on 127.0.0.1:$port with $module"
echo
echo "Reply: [granted, remaining, wait_ms, reset_ms]. Bucket: burst 8, 9 tokens per second."
echo
show() { printf '%-52s -> %s\n' "$*" "$(cli "$@" | paste -sd' ')"; }
for i in $(seq 9); do show THROTTLE.TAKE demo:pix 8 9; done
echo "  (the 9th found no token: it is told to retry in wait_ms, and nothing was written)"
for i in $(seq 3); do show THROTTLE.TAKE demo:pix 8 9 MAXWAIT 5000; done
echo "  (MAXWAIT reserves: granted now, to be used after wait_ms; the bucket goes into debt)"
show THROTTLE.TAKE demo:pix 8 9 TOKENS 0
show PTTL demo:pix
echo "  (the key expires the moment the bucket is full again)"
show THROTTLE.TAKE demo:pix 8 9 TOKENS 9
show THROTTLE.TAKE demo:pix 8 abc
