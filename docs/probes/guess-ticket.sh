#!/usr/bin/env bash
# Guesses another client's THROTTLE.GIVE ticket and gives its tokens back, to show what the
# trust model (docs/trust-model.md) says: a ticket is not a secret.
#
#   1. a "victim" takes the whole burst of a bucket (capacity 10, 1 token per second) with
#      TICKET, as the client does for every take, and keeps the ticket to itself;
#   2. the "prober" reads the server's clock (TIME) and the bucket (THROTTLE.PEEK): the ticket is
#      the bucket's state in µs, and PEEK's reset_ms puts it within about a millisecond;
#   3. the prober sends THROTTLE.GIVE for every µs in that window, on one connection, nearest
#      the likeliest instant first, until one gives 10 tokens back, and then takes the burst
#      itself: the burst is used twice.
#
# Usage: docs/probes/guess-ticket.sh [path/to/libredis_throttle_module.so]
# (default: target/debug/libredis_throttle_module.so; build it with
# `cargo build -p redis-throttle-module`). Needs redis-server and redis-cli (Redis 7.0+; Debian:
# `apt-get install redis-server redis-tools`). Starts a private redis-server on a free loopback
# port and stops it when it ends.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

module="${1:-target/debug/libredis_throttle_module.so}"
[ -f "$module" ] || { echo "no module at $module: cargo build -p redis-throttle-module" >&2; exit 1; }
module="$(cd "$(dirname "$module")" && pwd)/$(basename "$module")"

dir="$(mktemp -d)"
port=$((20000 + RANDOM % 20000))
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --loadmodule "$module" --daemonize yes --logfile "$dir/log" --pidfile "$dir/pid"
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
cli() { redis-cli -p "$port" "$@"; }

key="quota:probe"
quota=(10 1)

# 1. The victim: the whole burst, with its ticket (the prober never sees this reply).
victim="$(cli THROTTLE.TAKE "$key" "${quota[@]}" TOKENS 10 TICKET | tr '\n' ' ')"
read -r granted _ _ _ ticket <<<"$victim"
[ "$granted" = 1 ] || { echo "the victim's take was refused: $victim" >&2; exit 1; }

# 2. The prober: the clock before and after one PEEK (one connection, three round trips).
read -r t0s t0us reset_ms t1s t1us <<<"$(printf 'TIME\nTHROTTLE.PEEK %s %s %s\nTIME\n' \
    "$key" "${quota[@]}" | cli | awk 'NR==1||NR==2||NR==6||NR==9||NR==10' | tr '\n' ' ')"
t0=$((t0s * 1000000 + t0us)) t1=$((t1s * 1000000 + t1us))
# The state is within (now + reset_ms - 1 ms, now + reset_ms], now between t0 and t1.
low=$((t0 + (reset_ms - 1) * 1000)) high=$((t1 + reset_ms * 1000))

# 3. One GIVE per µs in the window (redis-cli runs them one after the other), nearest the
#    likeliest instant first.
middle=$(((t0 + t1) / 2 + reset_ms * 1000 - 500))
replies="$(for ((d = 0; middle - d >= low || middle + d <= high; d++)); do
    guesses=($((middle - d)) $((middle + d)))
    [ "$d" -eq 0 ] && guesses=("$middle")
    for guess in "${guesses[@]}"; do
        [ "$guess" -ge "$low" ] && [ "$guess" -le "$high" ] || continue
        printf 'THROTTLE.GIVE %s %s %s 10 %s\n' "$key" "${quota[@]}" "$guess"
    done
done | cli)"
sent="$(wc -l <<<"$replies")"
found="$(grep -n '^10$' <<<"$replies" | head -1 | cut -d: -f1 || true)"
again="$(cli THROTTLE.TAKE "$key" "${quota[@]}" TOKENS 10 | head -1)"

echo "victim's take: granted 10 tokens, ticket $ticket (kept secret)"
echo "prober's window: $((high - low + 1)) candidate tickets from one PEEK (reset_ms $reset_ms)"
if [ -n "$found" ]; then
    echo "GIVE number $found of $sent gave the 10 tokens back"
else
    echo "no GIVE of $sent gave anything back"
fi
echo "prober's take of the whole burst right after: granted=$again (1: the burst was used twice)"
