-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- The THROTTLE commands in Lua, for servers that cannot load the module (managed Redis and
-- Valkey services refuse MODULE LOAD). One source, two forms:
--
-- * A function library (Redis 7.0+, Valkey): `FUNCTION LOAD` it with the line
--   `#!lua name=throttle` in front. It is kept in the RDB and the AOF and sent to replicas, so a
--   restart or a failover keeps it, and its helpers are built once, at load. Each command is a
--   function with the module command's arguments after the keys:
--
--     FCALL throttle_take 1 key capacity rate [TOKENS n] [MAXWAIT ms] [TICKET] [FLOOR f]
--         [INFLIGHT n] [LEASE ms] [LINE place_ms] [WAITER id]
--         -> {granted, remaining, wait_ms, reset_ms[, ticket][, slot][, place][, reason]}
--     FCALL throttle_mtake N key1 .. keyN capacity rate tokens [...] [MAXWAIT ms] [FLOOR f ...]
--         [TICKET] [INFLIGHT n] [LEASE ms] [LINE place_ms] [WAITER id]
--         -> {granted, wait_ms, remaining_1, reset_ms_1, ...[, ticket_1, ...][, slot][, place]
--             [, reason]}
--     FCALL throttle_pause 1 key capacity rate ms              -> ms until the next token
--     FCALL throttle_give 1 key capacity rate n ticket         -> tokens given back
--     FCALL_RO throttle_peek 1 key capacity rate
--         -> {1, remaining, 0, reset_ms, paused_ms, factor_bp}
--     FCALL throttle_cut 1 key capacity rate ms factor recovery_ms
--         -> {cut, next_ms, factor_bp, recovered_ms}
--     FCALL throttle_sync 1 key capacity rate remaining reset_ms -> {lowered, remaining, reset_ms}
--     FCALL throttle_debit 1 key capacity rate n               -> {remaining, reset_ms}
--     FCALL throttle_renew 1 key capacity rate slot ms         -> 1 if held (renewed), else 0
--     FCALL throttle_release 1 key capacity rate slot [INFLIGHT n]
--         -> 1 if held (freed) or a waiter's ticket in line (it leaves), else 0
--     FCALL_RO throttle_slots 1 key capacity rate              -> {held, first_lease_ms}
--     FCALL throttle_resume 1 key capacity rate                -> 1 if a pause or cut ended, else 0
--     FCALL throttle_quota 1 key capacity rate [CLEAR]         -> {changed, remaining, reset_ms}
--     FCALL_RO throttle_version 0                              -> the library's version
--
-- * A script (`EVALSHA`), as it is, for servers that refuse FUNCTION: the same commands with
--   their name first, `EVALSHA sha 1 key take capacity rate ...` (`EVALSHA_RO` for peek and
--   slots).
--
-- Each is THROTTLE.<COMMAND>: the same semantics, the same stored state, the same replies and
-- the same error messages, byte for byte; the arithmetic is the bucket crate's
-- (`throttle-bucket`), followed step by step below. The state is the instant (ns since the Unix
-- epoch) at which the bucket is full again, as 8 bytes (the i64, little-endian), or 32 while
-- the supplier's pause or cut is in effect, or 40 + 16 per slot while calls are in flight, or
-- 48 + 16 per slot + 32 per waiter while callers wait in the line for a slot; it is written
-- with `SET key <state> PXAT <ms>` only when something changes, so a key written by
-- the module can be used here and back. The tests hold the two to that, case by case, on every
-- supported server. `peek`, `slots` and `version` never write: they run under FCALL_RO /
-- EVALSHA_RO, on a read-only replica and during CLIENT PAUSE WRITE.
--
-- The clock is the server's (`TIME`, microseconds), so calls are replicated by their effects,
-- not by themselves (the default from Redis 7 on): replicas and the AOF get the SET, never the
-- call.
--
-- Lua numbers are doubles, exact only up to 2^53 (in ns: 104 days), while instants are
-- ~1.8e18 ns. So instants and durations are pairs (s, n) = s * 1e9 + n ns with 0 <= n < 1e9,
-- and every step is exact: no rounding ever hands out a token early. Common inputs take short
-- paths; the long ones (16+ digit numbers, long decimals, huge buckets) are exact too.
--
-- Layout: limits and error texts, pair arithmetic, argument parsing, the stored state, the
-- bucket as seen at an instant, one function per command, and the entry points at the end.

-- Limits, the module's own -----------------------------------------------------------------

local VERSION = 16                     -- of this library; a client replaces an older one
local E9 = 1000000000
local MAX_CAPACITY = 1000000000000000
local MAX_WAIT_MS = 315360000000       -- 10 years: MAXWAIT, a pause, a recovery
local MAX_FILL_S = 315360000           -- 10 years, the longest capacity / rate
local MAX_DEBT_S = 630720000           -- 20 years: the deepest debt any command leaves
local MAX_KEYS = 16
local MAX_TICKET = '9223372036854775'  -- i64::MAX ns in µs, 16 digits
local MAX_NOW_S = 7258118400           -- clock readings are clamped to the year 2200
local I64_S, I64_N = 9223372036, 854775807 -- i64::MAX ns: no state goes past it
local EARLIEST_S = 1577836800          -- 2020-01-01: no command writes a state before it
local LATEST_AHEAD_S = 662256000       -- 21 years: nor one further after the clock
local FRACTION_DIGITS = 24             -- rate digits after the point that count
local FULL = 10000                     -- the factor of a rate not cut, in basis points
local MIN_FACTOR = 100                 -- a cut never takes the rate below 1 %
local MAX_INFLIGHT = 1024              -- slots a bucket holds at most (calls in flight)
local MAX_LINE = 1024                  -- callers a bucket's line for a slot holds at most
local MAX_SLOT_ID = 9007199254740992   -- 2^53: every slot id is an exact double
local TWO32 = 4294967296
-- Durations below 2^51 ns (26 days) are exact doubles, and so are sums of a few of them:
-- buckets that fill within it, and debts below it, take a fast path in plain numbers.
local SMALL_S = 2251799

-- The standard libraries cannot be reached while a library loads, only when its functions
-- run: the entry points capture what they use on their first call (once per call for the
-- script, once per load for the library).
local floor, ceil, byte, char, find, sub, tonum

local function std()
  floor, ceil = math.floor, math.ceil
  byte, char, find, sub = string.byte, string.char, string.find, string.sub
  tonum = tonumber
end

