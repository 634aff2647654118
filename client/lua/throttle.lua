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

-- Error replies: the module's, for its arguments, its stored state and its keys ------------

-- The texts, the module's byte for byte, built on the first error (the script builds them
-- only for a call that fails).
local TEXTS

local function fail(code, ...)
  if not TEXTS then
    TEXTS = {
      arity = "ERR wrong number of arguments for 'throttle.%s' command",
      capacity = 'ERR capacity must be a whole number of tokens from 1 to 1000000000000000',
      rate = 'ERR rate must be a decimal number of tokens per second from 0.000001 to '
        .. '1000000000, like 10 or 0.5',
      fill = 'ERR capacity / rate must be at most 315360000 seconds (10 years): raise the '
        .. 'rate or lower the capacity',
      tokens = 'ERR TOKENS must be a whole number from 0 to the capacity (%d)',
      max_wait = 'ERR MAXWAIT must be a whole number of milliseconds from 0 to 315360000000 '
        .. '(10 years)',
      take_option = 'ERR unknown option for THROTTLE.TAKE: the options are TOKENS n, MAXWAIT '
        .. 'ms, TICKET, FLOOR f, INFLIGHT n, LEASE ms, LINE place_ms and WAITER id',
      mtake_option = 'ERR unknown option for THROTTLE.MTAKE: the options are MAXWAIT ms, '
        .. 'FLOOR f [f ...] (one floor per key), TICKET, INFLIGHT n, LEASE ms, LINE place_ms and '
        .. 'WAITER id',
      release_option = 'ERR unknown option for THROTTLE.RELEASE: the option is INFLIGHT n, the '
        .. 'cap the slot was taken under',
      quota_option = "ERR unknown option for THROTTLE.QUOTA: the option is CLEAR, which gives "
        .. "the key back to its callers' quotas",
      missing = 'ERR %s needs a value: %s n',
      repeated = 'ERR %s is given more than once',
      pause_ms = 'ERR ms must be a whole number of milliseconds from 1 to 315360000000 '
        .. "(10 years): the supplier's Retry-After",
      give_tokens = 'ERR n must be a whole number of tokens from 0 to the capacity (%d)',
      ticket = 'ERR ticket must be a ticket from a THROTTLE.TAKE or MTAKE ... TICKET reply for '
        .. 'this key (a whole number of microseconds)',
      numkeys = 'ERR numkeys must be a whole number from 1 to 16',
      triples = 'ERR THROTTLE.MTAKE needs capacity, rate and tokens for each of its %d keys, '
        .. 'in key order, then the options (MAXWAIT ms, FLOOR f [f ...], TICKET, INFLIGHT n, '
        .. 'LEASE ms, LINE place_ms, WAITER id)',
      duplicate = 'ERR the keys of THROTTLE.MTAKE must be distinct: name each bucket once',
      floor = 'ERR FLOOR must be a whole number of tokens below the capacity (%d) that '
        .. "leaves room for the call's TOKENS",
      floors = 'ERR FLOOR needs one floor per key, in key order: %d values',
      factor = 'ERR factor must be a decimal from 0.01 to 1, like 0.7: the rate is multiplied '
        .. 'by it',
      recovery = 'ERR recovery_ms must be a whole number of milliseconds from 1 to '
        .. '315360000000 (10 years): how long the rate takes to climb back',
      remaining = 'ERR remaining must be a whole number of tokens from 0 to 1000000000000000: '
        .. 'what the supplier says is left',
      reset_ms = 'ERR reset_ms must be a whole number of milliseconds from 0 to 315360000000 '
        .. "(10 years): when the supplier's quota resets",
      debit_tokens = 'ERR n must be a whole number of tokens from 0 to 1000000000000000',
      too_deep = 'ERR THROTTLE.DEBIT would put the bucket more than 20 years in debt: debit '
        .. 'fewer tokens, or DEL the key to start a full bucket',
      wrongtype = 'WRONGTYPE the key holds a value that is not a string, so not a THROTTLE '
        .. 'bucket: use another key',
      not_bucket = 'ERR the key holds a string that is not a THROTTLE bucket (expected the 8- '
        .. 'or 32-byte state THROTTLE.TAKE writes, or one with calls in flight); use another '
        .. 'key, or DEL this one to start a full bucket',
      inflight = 'ERR INFLIGHT must be a whole number of calls from 1 to 1024: how many may be '
        .. 'in flight at once',
      lease = 'ERR the lease must be a whole number of milliseconds from 1 to 315360000000 '
        .. '(10 years): longer than a round trip plus the renewal period',
      inflight_lease = 'ERR INFLIGHT and LEASE go together: INFLIGHT n LEASE ms takes a slot '
        .. 'for a call in flight, held for ms unless renewed',
      line_inflight = 'ERR LINE needs INFLIGHT n LEASE ms: the line is for a slot under that '
        .. 'cap',
      waiter_line = 'ERR WAITER needs LINE place_ms: WAITER id looks again at a place in the '
        .. 'line',
      line_floor = 'ERR LINE does not go with FLOOR: a floored call waits for its tokens and '
        .. 'takes again, without a place in line',
      place_ms = "ERR LINE's place_ms must be a whole number of milliseconds from 1 to "
        .. '315360000000 (10 years): how long a waiter keeps its place without looking again',
      line_full = 'ERR the line for a slot is full (1024 waiters): wait a lease and take again',
      slot_id = 'ERR slot must be a slot id from a THROTTLE.TAKE ... INFLIGHT reply (a whole '
        .. 'number from 0 to 9007199254740992)',
      -- The script's and the library's own rules: which command, and one key for the one-key
      -- commands.
      command = 'ERR unknown THROTTLE script command: the first argument must be take, mtake, '
        .. 'pause, give, peek, cut, sync, debit, renew, release, slots, resume or quota',
      one_key = "ERR the THROTTLE script's %s takes exactly one key: EVALSHA sha 1 key %s",
      one_key_function = 'ERR throttle_%s takes exactly one key: FCALL throttle_%s 1 key %s',
    }
  end
  return redis.error_reply(string.format(TEXTS[code], ...))
end

-- (s, n) pairs: s * 1e9 + n ns, normalised (0 <= n < 1e9), negative iff s < 0 -------------

local function add(as, an, bs, bn)
  local s, n = as + bs, an + bn
  if n >= E9 then
    return s + 1, n - E9
  end
  return s, n
end

local function sub2(as, an, bs, bn)
  local s, n = as - bs, an - bn
  if n < 0 then
    return s - 1, n + E9
  end
  return s, n
end

local function lt(as, an, bs, bn)
  return as < bs or (as == bs and an < bn)
end

local function max(as, an, bs, bn)
  if lt(as, an, bs, bn) then
    return bs, bn
  end
  return as, an
end

-- a * b ns as a pair, exactly, for whole a <= 4e15 and b <= 1e15 whose product is below 2^63.
local function mul(a, b)
  local p = a * b
  if p < 9e15 then -- then the true product is below 2^53, and p is exact
    return floor(p / E9), p % E9
  end
  local ah, al = floor(a / 1e6), a % 1e6
  local bh, bl = floor(b / 1e6), b % 1e6
  local m = ah * bl + al * bh -- < 5e15
  local t = al * bl           -- < 1e12
  local s = ah * bh * 1000 + floor(m / 1000) + floor(t / E9)
  local n = (m % 1000) * 1e6 + t % E9
  if n >= E9 then
    return s + 1, n - E9
  end
  return s, n
end

-- A pair times a whole k <= 1e4, for a pair below 1e30 ns: exact (s * k stays below 2^53).
local function scale(s, n, k)
  local m = n * k -- < 1e13
  return s * k + floor(m / E9), m % E9
end

-- floor(x / d) of a pair x >= 0 by a whole d <= 1e4: the quotient as a pair, and whether a
-- remainder was left.
local function div_small(s, n, d)
  local qs, r = floor(s / d), s % d
  local m = r * E9 + n -- < 1e13
  local qn = floor(m / d)
  return qs, qn, m - qn * d > 0
end

-- floor(x / d) for a pair x >= 0 and a whole d in 1..1e15, exactly, and the remainder in ns.
-- A quotient above 4e15 comes back as math.huge: no caller needs one above 1e15.
local function divmod(s, n, d)
  if s < 9000000 then
    -- x < 9e15 < 2^53 is exact, and a quotient whose fraction is at least 1/d never rounds
    -- across a whole number (x / d carries less than 1/d of error below 2^53).
    local x = s * E9 + n
    local q = floor(x / d)
    return q, x - q * d
  end
  local q = floor((s * E9 + n) / d) -- off by a few at most; corrected with exact products
  if q > 4e15 then
    return math.huge, 0
  end
  for _ = 1, 8 do
    local ps, pn = mul(q, d)
    if lt(s, n, ps, pn) then
      q = q - 1
    else
      local rs, rn = sub2(s, n, ps, pn)
      local r = rs * E9 + rn
      if r < d then
        return q, r
      end
      q = q + 1
    end
  end
  error('divmod did not converge') -- unreachable: the estimate is within a few units
end

-- A pair >= 0 in whole ms, rounded up, as the module rounds.
local function ceil_ms(s, n)
  return s * 1000 + ceil(n / 1e6)
end

-- A whole number of ms as a pair.
local function ms_pair(ms)
  return floor(ms / 1000), (ms % 1000) * 1e6
end

-- Arguments: words, quotas and intervals, read as the module reads them, in its order ------

-- Every parse below is linear in its input: a pattern that can backtrack (`^0*(%d*)$`) costs
-- N^2 or worse on a long argument, inside one string call where the script's time limit is
-- never checked. Only single-class finds (each position tried once) and plain finds are used.

-- Whole numbers read before, by their text (a library's calls send the same few again and
-- again); bounded: cleared when it grows past 256.
local WHOLES, WHOLES_SEEN = {}, 0

-- A whole number in ASCII digits (no sign, no spaces), 0..=max (max <= 1e15); nil otherwise.
local function whole(text, max_value)
  local value = WHOLES[text]
  if not value then
    if text == '' or find(text, '%D') then
      return nil
    end
    if #text <= 15 then -- the common case: below 2^53, so tonumber is exact
      value = tonum(text)
    else
      local first = find(text, '[^0]')
      if not first then
        return 0
      end
      if #text - first >= 16 then -- 17 digits or more: above any max
        return nil
      end
      value = tonum(sub(text, first)) -- exact up to 2^53; any 16 digits above are > max
    end
    if #text <= 32 then
      if WHOLES_SEEN >= 256 then
        WHOLES, WHOLES_SEEN = {}, 0
      end
      WHOLES[text], WHOLES_SEEN = value, WHOLES_SEEN + 1
    end
  end
  if value > max_value then
    return nil
  end
  return value
end

-- Limbs in base 1e7 of a decimal string, least significant first.
local function limbs(text)
  local out, i = {}, #text
  while i > 0 do
    local j = i - 6
    if j < 1 then
      j = 1
    end
    out[#out + 1] = tonum(sub(text, j, i))
    i = j - 1
  end
  return out
end

-- Whether q * den >= num, exactly, for limbs den and num and a whole q <= 2e15.
local function covers(q, den, num)
  local a, product = limbs(string.format('%d', q)), {}
  for i = 1, #a + #den do
    product[i] = 0
  end
  for i = 1, #a do
    local carry = 0
    for j = 1, #den do
      local x = product[i + j - 1] + a[i] * den[j] + carry
      carry = floor(x / 1e7)
      product[i + j - 1] = x - carry * 1e7
    end
    product[i + #den] = product[i + #den] + carry
  end
  local top = #product
  if #num > top then
    top = #num
  end
  for i = top, 1, -1 do
    local x, y = product[i] or 0, num[i] or 0
    if x ~= y then
      return x > y
    end
  end
  return true
end

-- A plain decimal's digits either side of its point (digits, a point, digits; one side may be
-- empty, not both): the whole part and the fraction ('' without a point); nil otherwise.
local function decimal_parts(text)
  local int, frac = text, ''
  local point = find(text, '.', 1, true)
  if point then
    int, frac = sub(text, 1, point - 1), sub(text, point + 1)
  end
  if (int == '' and frac == '') or find(int, '%D') or find(frac, '%D') then
    return nil
  end
  return int, frac
end

-- The digits of a fraction that count: the first FRACTION_DIGITS, without trailing zeros.
local function fraction_digits(frac)
  frac = sub(frac, 1, FRACTION_DIGITS)
  local last = #frac
  while last > 0 and byte(frac, last) == 48 do -- at most 24 steps
    last = last - 1
  end
  return sub(frac, 1, last)
end

-- One token's refill time in whole ns, rounded up: ceil(1e9 / rate). The rate is a plain
-- decimal from 0.000001 to 1000000000 with any number of digits after the point; digits
-- past the 24th are dropped (a longer interval: fewer tokens), but the upper limit is
-- checked on all of them. nil for anything else.
local function parse_interval(text)
  -- A whole rate, the common case: 1e9 / rate is exact enough to round up right (below).
  if #text <= 10 and not find(text, '%D') and text ~= '' then
    local rate = tonum(text)
    if rate < 1 or rate > E9 then
      return nil
    end
    return ceil(E9 / rate)
  end
  -- Digits, a point, digits: leading zeros and trailing fraction zeros left out.
  local int, frac = decimal_parts(text)
  if not int then
    return nil
  end
  local first = find(int, '[^0]')
  if not first then
    int = ''
  elseif first > 1 then
    int = sub(int, first)
  end
  if #int > 10 then
    return nil
  end
  -- Above 1e9, however little: checked on every digit, before any are dropped.
  if #int == 10 and (find(frac, '[^0]') or int > '1000000000') then
    return nil
  end
  frac = fraction_digits(frac)
  -- rate = digits / 10^#frac, exactly.
  local digits = int .. frac
  if int == '' then
    local nonzero = find(frac, '[^0]')
    digits = nonzero and sub(frac, nonzero) or ''
  end
  if digits == '' or #digits + 6 <= #frac then -- zero, or below 1e-6
    return nil
  end
  local k = 9 + #frac -- interval = ceil(10^k / digits)
  if k <= 15 and #digits <= 15 then
    -- Exact: both are exact doubles, and a quotient q with q * digits <= 1e15 < 2^53 is never
    -- rounded across a whole number (its fraction is at least 1/digits, over half its ulp).
    local num = E9
    for _ = 1, #frac do
      num = num * 10
    end
    return ceil(num / tonum(digits))
  end
  -- Up to 34 digits: the double estimate is within one; fix it with exact products.
  local num, den = limbs('1' .. string.rep('0', k)), limbs(digits)
  local interval = ceil(tonum('1e' .. k) / tonum(digits))
  if interval < 1 then
    interval = 1
  end
  for _ = 1, 8 do
    if interval > 1 and covers(interval - 1, den, num) then
      interval = interval - 1
    elseif not covers(interval, den, num) then
      interval = interval + 1
    else
      return interval
    end
  end
  error('interval did not converge') -- unreachable
end

-- The shortest decimal of a valid rate's value, the text a kept quota is stored with (the
-- module's): leading zeros and trailing fraction zeros dropped, digits past the 24th dropped,
-- '0' for an empty integer part, no point for a whole number.
local function canonical_rate(text)
  local int, frac = decimal_parts(text)
  local first = find(int, '[^0]')
  int = first and sub(int, first) or '0'
  frac = fraction_digits(frac)
  if frac == '' then
    return int
  end
  return int .. '.' .. frac
end

-- Quotas seen before, by rate then capacity text: a hot key's quota is parsed once (in the
-- library; the script's table lives for one call). Bounded: cleared when it grows past 64.
local QUOTAS, QUOTAS_SEEN = {}, 0

-- `capacity rate`: capacity, then rate, then that the bucket fills within 10 years. Returns
-- the quota {capacity, interval, fill_s, fill_n}, or nil and the error's code.
local function parse_quota(capacity_text, rate_text)
  local by_capacity = QUOTAS[rate_text]
  local quota = by_capacity and by_capacity[capacity_text]
  if quota then
    return quota
  end
  local capacity = whole(capacity_text, MAX_CAPACITY)
  if not capacity or capacity < 1 then
    return nil, 'capacity'
  end
  local interval = parse_interval(rate_text)
  if not interval then
    return nil, 'rate'
  end
  -- The double product rounds monotonically and the limit is an exact double, so a product
  -- above it is too long for sure; at or below it, the exact pair decides.
  if capacity * interval > MAX_FILL_S * E9 then
    return nil, 'fill'
  end
  local fill_s, fill_n = mul(capacity, interval)
  if lt(MAX_FILL_S, 0, fill_s, fill_n) then
    return nil, 'fill'
  end
  quota = { capacity = capacity, interval = interval, fill_s = fill_s, fill_n = fill_n }
  if fill_s < SMALL_S then
    quota.fill = fill_s * E9 + fill_n -- below 2^51 ns: the fast path's plain number
  end
  if #capacity_text <= 32 and #rate_text <= 64 then
    if QUOTAS_SEEN >= 64 then
      QUOTAS, QUOTAS_SEEN = {}, 0
    end
    if not QUOTAS[rate_text] then
      QUOTAS[rate_text] = {}
    end
    QUOTAS[rate_text][capacity_text] = quota
    QUOTAS_SEEN = QUOTAS_SEEN + 1
  end
  return quota
end

-- `TOKENS n` (or an MTAKE triple's tokens): 0..=capacity.
local function parse_tokens(text, capacity)
  local tokens = whole(text, capacity)
  if not tokens then
    return nil, 'tokens'
  end
  return tokens
end

local function parse_max_wait(text)
  local ms = whole(text, MAX_WAIT_MS)
  if not ms then
    return nil, 'max_wait'
  end
  return ms
end

-- A duration of 1 ms to 10 years (a pause, a recovery, a lease, a place in line); nil otherwise.
local function parse_ms(text)
  local ms = whole(text, MAX_WAIT_MS)
  if not ms or ms < 1 then
    return nil
  end
  return ms
end

-- `FLOOR f`: fewer tokens than the capacity, and with the call's own at most the capacity.
local function parse_floor(text, tokens, capacity)
  local f = whole(text, MAX_CAPACITY)
  if not f or f >= capacity or f + tokens > capacity then
    return nil
  end
  return f
end

-- `0.7`, `1`: a decimal from 0.01 to 1, in basis points; digits past the 4th after the point
-- are dropped (a smaller factor, a stricter cut), as the module drops them. nil otherwise.
local function parse_factor(text)
  local whole_part, frac = decimal_parts(text)
  if not whole_part then
    return nil
  end
  local first = find(whole_part, '[^0]')
  local bp
  if not first then
    bp = tonum(sub(frac .. '0000', 1, 4))
  elseif sub(whole_part, first) == '1' and not find(frac, '[^0]') then
    bp = FULL
  else
    return nil
  end
  if bp < MIN_FACTOR or bp > FULL then
    return nil
  end
  return bp
end

-- A slot id: a whole number from 0 to 2^53 (0 is never held); nil otherwise. Compared as text
-- past 15 digits, where a double could round a larger one down to 2^53.
local function parse_slot(text)
  if text == '' or find(text, '%D') then
    return nil
  end
  local first = find(text, '[^0]')
  if not first then
    return 0
  end
  local digits = sub(text, first)
  if #digits > 16 or (#digits == 16 and digits > '9007199254740992') then
    return nil
  end
  return tonum(digits)
end

-- The structure of INFLIGHT, LEASE, LINE and WAITER beside the other options (take's and
-- mtake's, as the module's SlotOptions::checked), checked before any value: the error's name,
-- or nil. INFLIGHT and LEASE go together, LINE needs INFLIGHT, WAITER needs LINE, and LINE
-- does not go with FLOOR.
local function check_slot_options(inflight_text, lease_text, line_text, waiter_text, floor_given)
  if (inflight_text == nil) ~= (lease_text == nil) then
    return 'inflight_lease'
  end
  if line_text and not inflight_text then
    return 'line_inflight'
  end
  if waiter_text and not line_text then
    return 'waiter_line'
  end
  if line_text and floor_given then
    return 'line_floor'
  end
  return nil
end

-- The values of INFLIGHT n LEASE ms and LINE place_ms [WAITER id], after the call's others
-- (take's and mtake's, as the module's SlotOptions::values): { cap, lease_ms, place_ms,
-- waiter_id } (the last two nil without LINE, the last without WAITER), or nil and the
-- error's name.
local function parse_slot_options(inflight_text, lease_text, line_text, waiter_text)
  local cap = whole(inflight_text, MAX_INFLIGHT)
  if not cap or cap < 1 then
    return nil, 'inflight'
  end
  local lease_ms = parse_ms(lease_text)
  if not lease_ms then
    return nil, 'lease'
  end
  if not line_text then
    return { cap, lease_ms }
  end
  local place_ms = parse_ms(line_text)
  if not place_ms then
    return nil, 'place_ms'
  end
  if not waiter_text then
    return { cap, lease_ms, place_ms }
  end
  local waiter_id = parse_slot(waiter_text)
  if not waiter_id then
    return nil, 'slot_id'
  end
  return { cap, lease_ms, place_ms, waiter_id }
end
-- The stored state, the module's bytes -----------------------------------------------------

-- The pair of the i64 whose little-endian bytes are b1..b8, for one below 2^63: the high 32
-- bits split in two so every step stays below 2^53. (Divisions of exact multiples are exact:
-- no call to math.floor, which costs a C call each.)
local function bytes_pair(b1, b2, b3, b4, b5, b6, b7, b8)
  local lo = b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
  local h0, h1 = b5 + b6 * 256, b7 + b8 * 256 -- bits 32..47 and 48..63
  -- 2^32 = 4 s + 294967296 ns; 2^48 = 281474 s + 976710656 ns.
  local n = h1 * 976710656 + h0 * 294967296 + lo
  local rest = n % E9
  return h1 * 281474 + h0 * 4 + (n - rest) / E9, rest
end

-- The pair of the i64 in bytes i+1..i+8 of `s`.
local function le_pair(s, i)
  return bytes_pair(byte(s, i + 1, i + 8))
end

-- The 8 bytes, little-endian, of the pair (s, n) of an i64 in 0..2^63: its low 16 bits from
-- s * 1e9 + n = s * (15258 * 65536 + 51712) + n, then the high 48, all below 2^53.
local function pair_le(s, n)
  local low = s * 51712 + n
  local r = low % 65536
  local q = s * 15258 + (low - r) / 65536 -- below 2^47
  local r0 = r % 256
  local q0 = q % 256
  q = (q - q0) / 256
  local q1 = q % 256
  q = (q - q1) / 256
  local q2 = q % 256
  q = (q - q2) / 256
  local q3 = q % 256
  q = (q - q3) / 256
  local q4 = q % 256
  return char(r0, (r - r0) / 256, q0, q1, q2, q3, q4, (q - q4) / 256)
end

-- Whether an instant can be a bucket's, seen at `now`: not before 2020 (while the clock is
-- past it), nor more than 21 years after the clock.
local function plausible(s, n, now_s, now_n)
  if s < EARLIEST_S and now_s >= EARLIEST_S then
    return false
  end
  return not lt(now_s + LATEST_AHEAD_S, now_n, s, n)
end

-- The u64 in bytes i+1..i+8 of `s`, for one up to 2^53 (a slot id); nil for a larger one.
local function le_id(s, i)
  local b1, b2, b3, b4, b5, b6, b7, b8 = byte(s, i + 1, i + 8)
  local hi = b5 + b6 * 256 + b7 * 65536
  local lo = b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
  if b8 ~= 0 or hi > 2097152 or (hi == 2097152 and lo > 0) then
    return nil
  end
  return hi * TWO32 + lo
end

-- The 8 bytes, little-endian, of a whole number from 0 to 2^53 (a slot id).
local function id_le(v)
  local lo = v % TWO32
  local hi = (v - lo) / TWO32
  return char(lo % 256, floor(lo / 256) % 256, floor(lo / 65536) % 256, floor(lo / 16777216),
    hi % 256, floor(hi / 256) % 256, floor(hi / 65536), 0)
end

-- The next id (bytes 33..40 of `stored`, at most 2^53) and the slots in bytes from+1..to (16
-- bytes each) into `slots` ({next = id, [i] = {id, s, n}} in id order), seen at `now`; nil if
-- they are not ones a command writes (ids from 1, increasing, below the next id; lease ends
-- plausible instants).
local function read_slots(stored, slots, from, to, now_s, now_n)
  local next_id, last = le_id(stored, 32), 0
  if not next_id then
    return nil
  end
  slots.next = next_id
  for at = from, to - 16, 16 do
    local id = le_id(stored, at)
    if not id or id <= last or id >= next_id or byte(stored, at + 16) >= 128 then
      return nil
    end
    local es, en = le_pair(stored, at + 8)
    if not plausible(es, en, now_s, now_n) then
      return nil
    end
    slots[#slots + 1] = { id, es, en }
    last = id
  end
  return slots
end

-- The table of a state with a line (48 + 16 k + 32 w bytes: the next id, then k, w, the cap
-- and the line's slack as u16, the k slots, the w waiters), seen at `now`: the slots as
-- `read_slots` reads them, with `cap`, `slack` and `line`, the waiters in the order they joined,
-- each {ticket, place_s, place_n, lease_ms, tokens}. nil if it is not one a command writes: the
-- counts exactly its length (1 to 1024 waiters, at most 1024 slots), the cap 1 to 1024, the
-- tickets increasing, below the next id and held by no slot, place ends plausible instants, a
-- lease of 1 to 315360000000 ms and at most 1e15 tokens.
local function line_of(stored, len, now_s, now_n)
  local k1, k2, w1, w2, c1, c2, s1, s2 = byte(stored, 41, 48)
  local k, w, cap = k1 + k2 * 256, w1 + w2 * 256, c1 + c2 * 256
  if k > MAX_INFLIGHT or w < 1 or w > MAX_LINE or cap < 1
    or cap > MAX_INFLIGHT or 48 + 16 * k + 32 * w ~= len then
    return nil
  end
  local first_waiter = 48 + 16 * k
  local slots = read_slots(stored, { cap = cap, slack = s1 + s2 * 256 }, 48, first_waiter,
    now_s, now_n)
  if not slots then
    return nil
  end
  local next_id = slots.next
  local held = {}
  for i = 1, #slots do
    held[slots[i][1]] = true
  end
  local line, last = {}, 0
  for at = first_waiter, len - 32, 32 do
    local id = le_id(stored, at)
    if not id or id <= last or id >= next_id or held[id] or byte(stored, at + 16) >= 128 then
      return nil
    end
    local ps, pn = le_pair(stored, at + 8)
    local lease, tokens = le_id(stored, at + 16), le_id(stored, at + 24)
    if not plausible(ps, pn, now_s, now_n) or not lease or lease < 1 or lease > MAX_WAIT_MS
      or not tokens or tokens > MAX_CAPACITY then
      return nil
    end
    line[#line + 1] = { id, ps, pn, lease, tokens }
    last = id
  end
  slots.line = line
  return slots
end

-- Whether a state of `len` bytes has the slot form (40 + 16 k) or the line form (48 + 16 k +
-- 32 w, 0 mod 16, whose counts tell exactly), by its length alone: 1 or 2, else nil.
local function table_form(len)
  if len >= 56 and len <= 40 + 16 * MAX_INFLIGHT and (len - 40) % 16 == 0 then
    return 1
  end
  if len >= 80 and len <= 48 + 16 * MAX_INFLIGHT + 32 * MAX_LINE and len % 16 == 0 then
    return 2
  end
  return nil
end

-- The state in `stored` (what `redis.pcall('GET', key)` answered), seen at `now`: the instant
-- the bucket is full again as a pair, and its pushback {until_s, until_n, cut = {s, n, factor,
-- recovery_ms} or nil} or nil; nothing for a missing key (a full bucket); or nil, nil, nil and
-- the error's code. Fifth, the calls in flight it holds (`read_slots`, `line_of`), or nil.
local function base_state_of(stored, now_s, now_n)
  if not stored then
    return nil
  end
  -- An error reply is a table, whose length is 0.
  local len, s, n = #stored, nil, nil
  local pushback, slots
  local form = len > 32 and table_form(len)
  if len == 8 or len == 32 or form then
    local b1, b2, b3, b4, b5, b6, b7, b8 = byte(stored, 1, 8)
    if b8 >= 128 then
      return nil, nil, nil, 'not_bucket'
    end
    s, n = bytes_pair(b1, b2, b3, b4, b5, b6, b7, b8)
    if form == 1 then
      -- The slot table (40 + 16 k bytes, k from 1 to 1024: the calls in flight).
      slots = read_slots(stored, {}, 40, len, now_s, now_n)
    elseif form then
      slots = line_of(stored, len, now_s, now_n)
    end
    if form and not slots then
      return nil, nil, nil, 'not_bucket'
    end
    if len == 32 or (form and not find(sub(stored, 9, 32), '^%z*$')) then
      if byte(stored, 16) >= 128 or byte(stored, 24) >= 128 then
        return nil, nil, nil, 'not_bucket'
      end
      local us, un = le_pair(stored, 8)
      if not plausible(us, un, now_s, now_n) then
        return nil, nil, nil, 'not_bucket'
      end
      pushback = { until_s = us, until_n = un }
      local cs, cn = le_pair(stored, 16)
      local r1, r2, r3, r4, r5, r6, f1, f2 = byte(stored, 25, 32)
      local recovery = r1 + r2 * 256 + r3 * 65536 + r4 * 16777216 + (r5 + r6 * 256) * 4294967296
      local factor = f1 + f2 * 256
      if cs ~= 0 or cn ~= 0 or recovery ~= 0 or factor ~= 0 then
        if factor < MIN_FACTOR or factor > FULL or recovery < 1 or recovery > MAX_WAIT_MS
          or not plausible(cs, cn, now_s, now_n) then
          return nil, nil, nil, 'not_bucket'
        end
        pushback.cut = { s = cs, n = cn, factor = factor, recovery = recovery }
      end
    end
  elseif type(stored) == 'table' then
    return nil, nil, nil, 'wrongtype'
  elseif stored == '' or len > 19 or find(stored, '%D') then
    return nil, nil, nil, 'not_bucket'
  elseif len <= 9 then
    s, n = 0, tonum(stored)
  else
    s, n = tonum(sub(stored, 1, -10)), tonum(sub(stored, -9))
  end
  if not plausible(s, n, now_s, now_n) then
    return nil, nil, nil, 'not_bucket'
  end
  return s, n, pushback, nil, slots
end

-- `state_of`'s sixth value, for a state that keeps a quota (THROTTLE.QUOTA): after the binary
-- form (8, 32 or a slot table), the capacity (8 bytes), the rate's shortest decimal, its length
-- (one byte) and the byte 0xFF, which no other form ends with. {q = the quota, capacity, text}.
local function state_of(stored, now_s, now_n)
  local len = type(stored) == 'string' and #stored or 0
  if len == 0 or byte(stored, len) ~= 255 then
    return base_state_of(stored, now_s, now_n)
  end
  local text_len = len > 1 and byte(stored, len - 1) or 0
  local base_len = len - text_len - 10
  local form = base_len > 32 and table_form(base_len)
  if not (base_len == 8 or base_len == 32 or form) or byte(stored, base_len) == 255 then
    return nil, nil, nil, 'not_bucket'
  end
  local capacity = le_id(stored, base_len)
  local text = sub(stored, base_len + 9, base_len + 8 + text_len)
  local quota = capacity and parse_quota(string.format('%.0f', capacity), text)
  if not quota or canonical_rate(text) ~= text then
    return nil, nil, nil, 'not_bucket'
  end
  local s, n, pushback, err, slots = base_state_of(sub(stored, 1, base_len), now_s, now_n)
  if err then
    return nil, nil, nil, err
  end
  return s, n, pushback, nil, slots, { q = quota, capacity = capacity, text = text }
end
-- The server's clock in µs as a pair, clamped to the year 2200 (it is never below 0). The µs
-- are converted by the multiplication itself: one strtod, where tonumber makes two.
local function clock()
  local time = redis.call('TIME')
  local s = tonum(time[1])
  if s >= MAX_NOW_S then
    return MAX_NOW_S, 0
  end
  return s, time[2] * 1000
end

-- Whether a state fits an i64: one past it is refused, never wrapped (only a forged state
-- gets there; the limits keep every real one decades inside).
local function fits(s, n)
  return not lt(I64_S, I64_N, s, n)
end

-- The instant a cut's rate is full again.
local function recovered_at(cut)
  return add(cut.s, cut.n, ms_pair(cut.recovery))
end

-- A cut's factor at `now`, in basis points: its own before the cut (a clock that reads
-- earlier: the strictest), the full rate once recovered, a straight line between, rounded
-- down.
local function factor_at(cut, now_s, now_n)
  local ds, dn = sub2(now_s, now_n, cut.s, cut.n)
  if ds < 0 then
    return cut.factor
  end
  local elapsed = ds * 1000 + floor(dn / 1e6)
  if elapsed <= 0 then
    return cut.factor
  end
  if elapsed >= cut.recovery then
    return FULL
  end
  return cut.factor + floor((FULL - cut.factor) * elapsed / cut.recovery)
end

-- SET key <state> PXAT <ms> for the bucket full again at `tat`, with the pushback kept as far
-- as it is in effect at `now` (a pause not over, a cut not recovered: 32 bytes) and the calls
-- in flight `slots` whose lease has not run out (after the 32 bytes: the next id, then 16
-- bytes a slot), the key expiring once all of it is over; DEL when the bucket is full and
-- nothing holds it back. The waiters of the table's line whose place has not run out are kept
-- too (then the counts after the next id, and 32 bytes a waiter after the slots), and the key
-- lives until the last place ends, so that the line keeps its order. With a `kept` quota, its
-- trailer after all that and no expiry: the quota goes with the key. (The module writes its
-- state the same way, step by step.)
local function store(key, tat_s, tat_n, pushback, now_s, now_n, slots, kept)
  local until_s, until_n = tat_s, tat_n
  local held, waiting
  if slots then
    for i = 1, #slots do
      local slot = slots[i]
      if lt(now_s, now_n, slot[2], slot[3]) then
        held = held or {}
        held[#held + 1] = id_le(slot[1]) .. pair_le(slot[2], slot[3])
        until_s, until_n = max(until_s, until_n, slot[2], slot[3])
      end
    end
    local line = slots.line
    for i = 1, line and #line or 0 do
      local w = line[i]
      if lt(now_s, now_n, w[2], w[3]) then
        waiting = waiting or {}
        waiting[#waiting + 1] = id_le(w[1]) .. pair_le(w[2], w[3]) .. id_le(w[4]) .. id_le(w[5])
        until_s, until_n = max(until_s, until_n, w[2], w[3])
      end
    end
  end
  local paused, cut = false, nil
  if pushback then
    paused = lt(now_s, now_n, pushback.until_s, pushback.until_n)
    cut = pushback.cut
    if cut and not lt(now_s, now_n, recovered_at(cut)) then
      cut = nil
    end
    if paused or cut then
      until_s, until_n = max(until_s, until_n, pushback.until_s, pushback.until_n)
      if cut then
        until_s, until_n = max(until_s, until_n, recovered_at(cut))
      end
    else
      pushback = nil
    end
  end
  if not kept and not lt(now_s, now_n, until_s, until_n) then
    redis.call('DEL', key) -- full again: a missing key is a full bucket
    return
  end
  local state = pair_le(tat_s, tat_n)
  if pushback then
    local tail = '\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0'
    if cut then
      local r = cut.recovery
      local hi = floor(r / 4294967296)
      local lo = r % 4294967296
      tail = pair_le(cut.s, cut.n) .. char(lo % 256, floor(lo / 256) % 256,
        floor(lo / 65536) % 256, floor(lo / 16777216), hi % 256, floor(hi / 256),
        cut.factor % 256, floor(cut.factor / 256))
    end
    state = state .. pair_le(pushback.until_s, pushback.until_n) .. tail
  end
  if held or waiting then
    if not pushback then
      state = state .. string.rep('\0', 24)
    end
    state = state .. id_le(slots.next)
    if waiting then
      local k, w, c, s = held and #held or 0, #waiting, slots.cap, slots.slack or 0
      state = state .. char(k % 256, floor(k / 256), w % 256, floor(w / 256), c % 256,
        floor(c / 256), s % 256, floor(s / 256))
    end
    if held then
      state = state .. table.concat(held)
    end
    if waiting then
      state = state .. table.concat(waiting)
    end
  end
  if kept then
    redis.call('SET', key, state .. id_le(kept.capacity) .. kept.text .. char(#kept.text, 255))
    return
  end
  redis.call('SET', key, state, 'PXAT', ceil_ms(until_s, until_n))
end

-- The bucket seen at `now`: `base`, when it is full, never before now (time never runs
-- backwards for a bucket), `debt`, how far ahead of now that is, and its rate's factor.
local function view(state_s, state_n, pushback, now_s, now_n)
  local base_s, base_n = now_s, now_n
  if state_s then
    base_s, base_n = max(now_s, now_n, state_s, state_n)
  end
  local debt_s, debt_n = sub2(base_s, base_n, now_s, now_n)
  local factor = FULL
  if pushback and pushback.cut then
    factor = factor_at(pushback.cut, now_s, now_n)
  end
  return base_s, base_n, debt_s, debt_n, factor
end

-- The cost of `tokens` at `factor`, ns: tokens * interval, or while cut that over the factor,
-- rounded up. nil for one past 1e18 ns (only a debit of a huge count gets there: too deep).
local function cost(quota, tokens, factor)
  if factor >= FULL then
    return mul(tokens, quota.interval)
  end
  if tokens * quota.interval > 1e18 then
    return nil
  end
  local s, n = mul(tokens, quota.interval)
  s, n = scale(s, n, FULL) -- (a call in the middle of an argument list gives one value)
  local qs, qn, rest = div_small(s, n, factor)
  if rest then
    return add(qs, qn, 0, 1)
  end
  return qs, qn
end

-- How long until `cost` is there: once the bucket has refilled to `cost` below full.
local function wait_for(quota, debt_s, debt_n, cost_s, cost_n)
  local s, n = add(debt_s, debt_n, cost_s, cost_n)
  s, n = sub2(s, n, quota.fill_s, quota.fill_n)
  if s < 0 then
    return 0, 0
  end
  return s, n
end

-- The first instant at which a cut's factor is at least `f` (the module's Cut::reaches): the
-- cut's own for a factor it starts at, the recovered instant for the full rate, and between
-- them the first whole ms the straight line reaches it.
local function reaches(cut, f)
  if f <= cut.factor then
    return cut.s, cut.n
  end
  local ms = cut.recovery
  if f < FULL then
    -- ceil((f - factor) * recovery / gap), exactly: the product is below 2^53.
    local climb, gap = (f - cut.factor) * cut.recovery, FULL - cut.factor
    local q = floor(climb / gap)
    if q * gap > climb then
      q = q - 1
    elseif (q + 1) * gap <= climb then
      q = q + 1
    end
    if q * gap < climb then
      q = q + 1
    end
    if q < ms then
      ms = q
    end
  end
  return add(cut.s, cut.n, ms_pair(ms))
end

-- How long until a take of `tokens` that leaves `floor_tokens` more behind it can be granted
-- (the module's View::wait_for): the wait for their cost now, unless a deep cut leaves a
-- bucket that cannot hold them at all; then until the recovering rate holds them (the least
-- factor that does, and when the cut reaches it), and at least until the debt allows them.
local function wait_tokens(quota, b, factor, tokens, floor_tokens)
  local function need(f)
    local s, n = cost(quota, tokens, f)
    if floor_tokens then
      s, n = add(s, n, cost(quota, floor_tokens, f))
    end
    return s, n
  end
  local need_s, need_n = need(factor)
  local cut = b.pushback and b.pushback.cut
  if not cut or not lt(quota.fill_s, quota.fill_n, need_s, need_n) then
    return wait_for(quota, b.debt_s, b.debt_n, need_s, need_n)
  end
  local short, holds = factor, FULL
  while holds - short > 1 do
    local mid = short + floor((holds - short) / 2)
    if lt(quota.fill_s, quota.fill_n, need(mid)) then
      short = mid
    else
      holds = mid
    end
  end
  local then_s, then_n = max(b.now_s, b.now_n, reaches(cut, holds))
  local wait_s, wait_n = wait_for(quota, b.debt_s, b.debt_n, need(factor_at(cut, then_s, then_n)))
  return max(wait_s, wait_n, sub2(then_s, then_n, b.now_s, b.now_n))
end

-- Whether a take may leave the state at `tat` (the module's View::write_with): one that moves
-- it more than 20 years after the clock is refused (only a reservation under a deep cut gets
-- there, and such a state would read as no bucket), and so is one past an i64.
local function writable(tat_s, tat_n, b)
  if lt(b.base_s, b.base_n, tat_s, tat_n) and lt(b.now_s + MAX_DEBT_S, b.now_n, tat_s, tat_n) then
    return false
  end
  return fits(tat_s, tat_n)
end

-- Whole tokens left with `debt` ahead of now, at `factor`: 0 while in debt past the capacity.
local function remaining(quota, debt_s, debt_n, factor)
  local s, n = sub2(quota.fill_s, quota.fill_n, debt_s, debt_n)
  if s < 0 then
    return 0
  end
  if factor < FULL then
    s, n = scale(s, n, factor)
    s, n = div_small(s, n, FULL)
  end
  return (divmod(s, n, quota.interval))
end

-- The ticket of a state: µs, rounded down. Exact: a state is at most 21 years after the clock,
-- itself clamped to the year 2200, so its µs stay below 2^53 (the year 2255).
local function ticket_of(s, n)
  return s * 1e6 + floor(n / 1000)
end

-- The shard channel a pause of `key` is announced on, in the key's own hash slot
-- (the module's channel name, byte for byte).
local function pause_channel(key)
  local open = find(key, '{', 1, true)
  if open then
    local close = find(key, '}', open + 1, true)
    if close and close > open + 1 then
      return 'throttle:pause:' .. key
    end
  end
  if key ~= '' and not find(key, '}', 1, true) then
    return 'throttle:pause:{' .. key .. '}'
  end
  return key
end

-- Where a pause until `until` puts the state, with `cut` as the bucket's cut: the first token
-- exactly then, no burst after (the module's View::paused_state).
local function paused_state(quota, until_s, until_n, cut)
  local factor_then = cut and factor_at(cut, until_s, until_n) or FULL
  local one_s, one_n = cost(quota, 1, factor_then)
  return add(until_s, until_n, sub2(quota.fill_s, quota.fill_n, one_s, one_n))
end

-- The bucket paused for `ms` from now, with `cut` as its cut, the module's pause step by step:
-- the first token exactly then, no burst after, never shorter than a pause or a
-- debt already there, and the bucket marked paused until then. Writes, announces, and returns
-- the ms until the next token, whether it wrote, and the state it leaves.
local function paused(key, quota, b, cut, ms)
  local pushback = b.pushback
  local until_s, until_n = add(b.now_s, b.now_n, ms_pair(ms))
  local stored_cut = pushback and pushback.cut
  local cut_changed = cut ~= stored_cut
  local target_s, target_n = paused_state(quota, until_s, until_n, cut)
  local longer = not pushback or lt(pushback.until_s, pushback.until_n, until_s, until_n)
  local tat_s, tat_n = max(b.base_s, b.base_n, target_s, target_n)
  local wrote = false
  -- The rate now (a recovering cut only gets faster, so the next token is never early).
  local factor_now = cut and factor_at(cut, b.now_s, b.now_n) or FULL
  if (lt(b.base_s, b.base_n, tat_s, tat_n) or longer or cut_changed) and fits(tat_s, tat_n) then
    local keep_s, keep_n = until_s, until_n
    if pushback then
      keep_s, keep_n = max(pushback.until_s, pushback.until_n, until_s, until_n)
    end
    -- Announced before the write: a server that refuses the announcement (an ACL without the
    -- channel) fails the call with nothing written. The pause, the state after it as a ticket
    -- and the factor, as the module's message.
    if longer then
      local heard = string.format('%d %.0f %d', ms, ticket_of(tat_s, tat_n), factor_now)
      redis.call('SPUBLISH', pause_channel(key), heard)
    end
    store(key, tat_s, tat_n, { until_s = keep_s, until_n = keep_n, cut = cut }, b.now_s, b.now_n,
      b.slots, b.kept)
    wrote = true
  else
    tat_s, tat_n = b.base_s, b.base_n
  end
  local now_one_s, now_one_n = cost(quota, 1, factor_now)
  local short_s, short_n = sub2(quota.fill_s, quota.fill_n, now_one_s, now_one_n)
  local next_s, next_n = sub2(tat_s, tat_n, short_s, short_n)
  return ceil_ms(sub2(next_s, next_n, b.now_s, b.now_n)), wrote, tat_s, tat_n
end

-- Reads the bucket at `key`: the view's fields in a table, or nil and the error's code. Its
-- `quota` is the one the command computes with: the key's own if it keeps one at the server
-- (THROTTLE.QUOTA), which wins over `quota`, the caller's.
local function open(key, quota)
  local now_s, now_n = clock()
  local state_s, state_n, pushback, err, slots, kept =
    state_of(redis.pcall('GET', key), now_s, now_n)
  if err then
    return nil, err
  end
  local base_s, base_n, debt_s, debt_n, factor = view(state_s, state_n, pushback, now_s, now_n)
  return {
    now_s = now_s, now_n = now_n, state_s = state_s, state_n = state_n, pushback = pushback,
    base_s = base_s, base_n = base_n, debt_s = debt_s, debt_n = debt_n, factor = factor,
    slots = slots, kept = kept, quota = kept and kept.q or quota,
  }
end


-- The line for a slot (THROTTLE.TAKE ... INFLIGHT n LEASE ms LINE place_ms) -----------------

-- A slot table as a write leaves it at `now` (the module's Slots::pruned): the slots whose
-- lease ran out and the waiters whose place ran out dropped; nil when nothing is left.
local function pruned(slots, now_s, now_n)
  if not slots then
    return nil
  end
  local out = { next = slots.next }
  for i = 1, #slots do
    local one = slots[i]
    if lt(now_s, now_n, one[2], one[3]) then
      out[#out + 1] = one
    end
  end
  local line, waiting = slots.line, nil
  for i = 1, line and #line or 0 do
    local w = line[i]
    if lt(now_s, now_n, w[2], w[3]) then
      waiting = waiting or {}
      waiting[#waiting + 1] = w
    end
  end
  if waiting then
    out.line, out.cap, out.slack = waiting, slots.cap, slots.slack
  elseif #out == 0 then
    return nil
  end
  return out
end

-- How many slots of `slots` are held at `now`, and when the first of them runs out (nil: none).
local function held_at(slots, now_s, now_n)
  local held, first_s, first_n = 0, nil, nil
  for k = 1, slots and #slots or 0 do
    local one = slots[k]
    if lt(now_s, now_n, one[2], one[3]) then
      held = held + 1
      if not first_s or lt(one[2], one[3], first_s, first_n) then
        first_s, first_n = one[2], one[3]
      end
    end
  end
  return held, first_s, first_n
end

-- The slot of `slots` whose id is `id`, if it is held at `now` ({id, s, n}), and its index.
local function held_slot(slots, id, now_s, now_n)
  for k = 1, slots and #slots or 0 do
    local one = slots[k]
    if one[1] == id and lt(now_s, now_n, one[2], one[3]) then
      return one, k
    end
  end
  return nil
end

-- The slots of `b` with the one whose id is `id` changed by `change` (given the slot, it
-- returns the new one, or nil to drop it), if it is held at `b`'s now; nil if it is not.
local function with_slot(b, id, change)
  local slots = b.slots
  local one, at = held_slot(slots, id, b.now_s, b.now_n)
  if not one then
    return nil
  end
  local changed = { next = slots.next, line = slots.line, cap = slots.cap, slack = slots.slack }
  for k = 1, #slots do
    if k ~= at then
      changed[#changed + 1] = slots[k]
    else
      changed[#changed + 1] = change(one)
    end
  end
  return changed
end

-- `slots` (pruned at `now`) with the lease of the slot `id` ending at `end` instead: a waiter
-- handed it that learns of it late keeps a whole lease.
local function with_lease(slots, now_s, now_n, id, end_s, end_n)
  local table_after = pruned(slots, now_s, now_n)
  for k = 1, #table_after do
    if table_after[k][1] == id then
      table_after[k] = { id, end_s, end_n }
    end
  end
  return table_after
end

-- Whether a caller waits in the line of `slots` at `now` (its place has not run out).
local function in_line(slots, now_s, now_n)
  local line = slots and slots.line
  for i = 1, line and #line or 0 do
    if lt(now_s, now_n, line[i][2], line[i][3]) then
      return true
    end
  end
  return false
end

-- The id the next slot or waiter of `slots` gets at `now`: the stored next id, or the clock in
-- µs if that is ahead (ids only grow); one from 2^53 on means the ids ran out.
local function next_id(slots, now_s, now_n)
  local id = now_s * 1e6 + floor(now_n / 1000)
  if slots and slots.next > id then
    id = slots.next
  end
  if id < 1 then
    id = 1
  end
  return id
end

-- `slots` (pruned at `now`) with a new slot, held for `lease_ms` from now, and its id; nil when
-- the ids ran out (a forged table).
local function with_new_slot(slots, now_s, now_n, lease_ms)
  local id = next_id(slots, now_s, now_n)
  if id >= MAX_SLOT_ID then
    return nil
  end
  local table_after = pruned(slots, now_s, now_n) or {}
  table_after.next = id + 1
  table_after[#table_after + 1] = { id, add(now_s, now_n, ms_pair(lease_ms)) }
  return table_after, id
end

-- The bucket `b` seen with its state at `tat` instead (after a hand-off took tokens).
local function view_at(b, tat_s, tat_n)
  local debt_s, debt_n = sub2(tat_s, tat_n, b.now_s, b.now_n)
  return { now_s = b.now_s, now_n = b.now_n, base_s = tat_s, base_n = tat_n, debt_s = debt_s,
    debt_n = debt_n, factor = b.factor, pushback = b.pushback }
end

-- Gives the table `slots` the waiters `rest` as its line: with none left, no line, nor the
-- line's cap and slack.
local function set_line(slots, rest)
  if #rest > 0 then
    slots.line = rest
  else
    slots.line, slots.cap, slots.slack = nil, nil, nil
  end
end

-- The line of the (pruned) table `slots` settled at `b`'s now, the module's line::settle: while
-- fewer than `cap` slots are held, the head waiter gets one, its ticket as the slot's id; its
-- tokens are taken then, as a take at that instant would (from `tat` on), and its slot's lease
-- runs from when they are there. A waiter whose tokens would put the bucket more than 20 years
-- in debt (a forged value) leaves instead. Returns the state after, the table (slots in id
-- order) and the slots handed, each {id, wait_s, wait_n}.
local function settle(quota, b, tat_s, tat_n, slots, cap)
  local now_s, now_n = b.now_s, b.now_n
  tat_s, tat_n = max(tat_s, tat_n, now_s, now_n)
  local handed = {}
  local line = slots and slots.line
  if not line then
    return tat_s, tat_n, slots, handed
  end
  local held, at = #slots, 1
  while held < cap and at <= #line do
    local w = line[at]
    at = at + 1
    local tokens = w[5]
    local wait_s, wait_n, after_s, after_n = 0, 0, tat_s, tat_n
    -- Past 1e18 ns of tokens the debt is past 20 years for sure (and past exact arithmetic).
    local fits_debt = tokens * quota.interval <= 1e18
    if tokens > 0 and fits_debt then
      wait_s, wait_n = wait_tokens(quota, view_at(b, tat_s, tat_n), b.factor, tokens, nil)
      local from_s, from_n = max(tat_s, tat_n, add(now_s, now_n, wait_s, wait_n))
      after_s, after_n = add(from_s, from_n, cost(quota, tokens, b.factor))
    end
    if fits_debt and not lt(now_s + MAX_DEBT_S, now_n, after_s, after_n) then
      tat_s, tat_n = after_s, after_n
      local end_s, end_n = add(now_s, now_n, wait_s, wait_n)
      end_s, end_n = add(end_s, end_n, ms_pair(w[4]))
      slots[#slots + 1] = { w[1], end_s, end_n }
      handed[#handed + 1] = { w[1], wait_s, wait_n }
      held = held + 1
    end
  end
  if #handed > 0 then
    table.sort(slots, function(x, y)
      return x[1] < y[1]
    end)
  end
  local rest = {}
  for i = at, #line do
    rest[#rest + 1] = line[i]
  end
  set_line(slots, rest)
  return tat_s, tat_n, slots, handed
end

-- Announces the first of the slots a settling `handed` (nil or {{id, wait_s, wait_n}, ...}) on
-- `key`'s channel, `handed <id> <wait_ms>`: its waiter goes ahead at once. Called after the
-- write, and protected: a server that refuses the announcement (an ACL without the channel)
-- still hands the slot on; the waiter finds it when it looks again. Whether there was one.
local function announce_handed(key, handed)
  local first = handed and handed[1]
  if first then
    redis.pcall('SPUBLISH', pause_channel(key),
      string.format('handed %.0f %.0f', first[1], ceil_ms(first[2], first[3])))
  end
  return first ~= nil
end

-- When the waiter with ticket `id`, at `place` in line, should be handed a slot, ms from `now`,
-- at the line's pace: each holder frees its slot the line's slack before its lease ends, and a
-- slot handed on is held for the waiter's own lease less the slack (a hold); a holder past its
-- time is expected as much later again as it is late, not sooner than an eighth of a hold, and
-- at the latest when its lease ends. nil
-- before the line saw a release, or with a slot free under the cap: the module's
-- line::turn_ms.
local function turn_ms(slots, now_s, now_n, id, place)
  local slack, lease = slots.slack or 0, nil
  for i = 1, slots.line and #slots.line or 0 do
    if slots.line[i][1] == id then
      lease = slots.line[i][4]
    end
  end
  if not lease then
    return nil
  end
  local hold = lease - slack
  if hold < 1 then
    hold = 1
  end
  local frees = {}
  for k = 1, #slots do
    local one = slots[k]
    if lt(now_s, now_n, one[2], one[3]) then
      local left = ceil_ms(sub2(one[2], one[3], now_s, now_n))
      local free = left - slack
      if free <= 0 then
        free = -free
        if free < floor(hold / 8) then
          free = floor(hold / 8)
        end
        if free > left then
          free = left
        end
      end
      frees[#frees + 1] = free
    end
  end
  local held = #frees
  if slack == 0 or held == 0 or held < slots.cap then
    return nil
  end
  table.sort(frees)
  -- The frees to wait for before this place's, the held slots above the cap first.
  local before = place - 1 + held - slots.cap
  return frees[before % held + 1] + floor(before / held) * hold
end

-- The line's slack after a holder released a slot with `left` (a pair) of its lease left: the
-- first release sets it, each later one weighs a quarter, in whole ms from 1 to 65535: the
-- module's line::slack_after.
local function slack_after(slack, left_s, left_n)
  local left = ceil_ms(left_s, left_n)
  if left < 1 then
    left = 1
  elseif left > 65535 then
    left = 65535
  end
  if not slack or slack == 0 then
    return left
  end
  return floor((3 * slack + left) / 4)
end

-- A waiter's denial (take's and mtake's alike, the module's line::look_again): when it should
-- look again if it hears nothing, as a pair, and what held it back: a slot, in line (4 + 16),
-- and 32 if that is when the line's pace says its turn comes (`turn_ms`). Without a pace, when
-- the first slot held may run out. Either way at least every half of its place lease (so that
-- it keeps its place), and never sooner than 1 ms.
local function look_again(slots, now_s, now_n, place_ms, id, place)
  local renew = floor(place_ms / 2)
  if renew < 1 then
    renew = 1
  end
  local ms, reason = renew, 4 + 16
  local turn = turn_ms(slots, now_s, now_n, id, place)
  if turn then
    ms, reason = turn, reason + 32
  else
    local _, first_s, first_n = held_at(slots, now_s, now_n)
    if first_s then
      ms = ceil_ms(sub2(first_s, first_n, now_s, now_n))
    end
  end
  if ms < 1 then
    ms = 1
  elseif ms > renew then
    ms = renew
  end
  return floor(ms / 1000), (ms % 1000) * 1e6, reason
end

-- The place of ticket `id` in the line of `slots` at `now` (1: the head), or nil: the module's
-- line::place_of.
local function place_of(slots, now_s, now_n, id)
  local line, place = slots and slots.line, 0
  for i = 1, line and #line or 0 do
    local w = line[i]
    if lt(now_s, now_n, w[2], w[3]) then
      place = place + 1
      if w[1] == id then
        return place
      end
    end
  end
  return nil
end

-- `slots` (pruned at `now`) with ticket `id`'s place renewed until `place_s, place_n`, `id` being
-- in line: the module's line::renewed_place.
local function renewed_place(slots, now_s, now_n, id, place_s, place_n)
  local table_after = pruned(slots, now_s, now_n)
  local renewed = {}
  for k = 1, #table_after.line do
    local v = table_after.line[k]
    if v[1] == id then
      v = { v[1], place_s, place_n, v[4], v[5] }
    end
    renewed[k] = v
  end
  table_after.line = renewed
  return table_after
end

-- `slots` (pruned at `now`) with a waiter at the back of the line under `cap` (its place kept
-- until `place_s, place_n`, its slot's lease `lease_ms`, its tokens), and its ticket: the
-- module's line::joined. nil and 'line_full' past the longest line; nil alone if the ids ran
-- out (a forged table).
local function joined(slots, now_s, now_n, cap, place_s, place_n, lease_ms, tokens)
  local table_after = pruned(slots, now_s, now_n) or {}
  local line = table_after.line or {}
  if #line >= MAX_LINE then
    return nil, 'line_full'
  end
  local id = next_id(slots, now_s, now_n)
  if id >= MAX_SLOT_ID then
    return nil
  end
  table_after.next, table_after.cap = id + 1, cap
  line[#line + 1] = { id, place_s, place_n, lease_ms, tokens }
  table_after.line = line
  return table_after, nil, id
end
-- The commands, each the module's command of the same name, step by step (take, mtake,
-- pause, give, peek, cut, sync, debit) -----------------------------------------------------
-- A one-key command is called as command(keys, args, quota): its entry (`one_key`, at the end)
-- has checked the key count, the arity and the quota; it checks its own arguments, then reads
-- the key (`open`).

local USAGE = {
  take = 'capacity rate [TOKENS n] [MAXWAIT ms] [TICKET] [FLOOR f] [INFLIGHT n] [LEASE ms]',
  pause = 'capacity rate ms',
  give = 'capacity rate n ticket',
  peek = 'capacity rate',
  cut = 'capacity rate ms factor recovery_ms',
  sync = 'capacity rate remaining reset_ms',
  debit = 'capacity rate n',
  renew = 'capacity rate slot ms',
  release = 'capacity rate slot',
  slots = 'capacity rate',
  resume = 'capacity rate',
  quota = 'capacity rate [CLEAR]',
}

-- The token part of a take from the bucket `b` (the module's take_tokens): granted (1 or 0),
-- the wait, the state after (nil unless granted with tokens), the debt after, and on a denial
-- what held the tokens back.
local function take_tokens(quota, b, factor, tokens, max_wait_ms, floor_tokens)
  local granted, wait_s, wait_n, reason = 1, 0, 0, 0
  local after_s, after_n = b.debt_s, b.debt_n
  if tokens == 0 then
    return 1, 0, 0, nil, nil, after_s, after_n, 0
  end
  local cost_s, cost_n = cost(quota, tokens, factor)
  wait_s, wait_n = wait_tokens(quota, b, factor, tokens, floor_tokens)
  granted = 0
  local limit_s, limit_n = ms_pair(max_wait_ms)
  if not lt(limit_s, limit_n, wait_s, wait_n) then
    -- Taken as of when the tokens are used: the bucket's own slot, unless a deep cut makes
    -- them wait for the rate to recover, past it.
    local act_s, act_n = add(b.now_s, b.now_n, wait_s, wait_n)
    local from_s, from_n = max(b.base_s, b.base_n, act_s, act_n)
    local tat_s, tat_n = add(from_s, from_n, cost_s, cost_n)
    -- A floored take never leaves the bucket in debt: its tokens are there now, and no deep
    -- cut's wait puts its slot past the bucket's fill.
    local no_debt = true
    if floor_tokens and floor_tokens > 0 then
      local ahead_s, ahead_n = sub2(tat_s, tat_n, b.now_s, b.now_n)
      no_debt = not lt(quota.fill_s, quota.fill_n, ahead_s, ahead_n)
    end
    if no_debt and writable(tat_s, tat_n, b) then
      after_s, after_n = sub2(tat_s, tat_n, b.now_s, b.now_n)
      return 1, wait_s, wait_n, tat_s, tat_n, after_s, after_n, 0
    end
  end
  -- What held the tokens back (the module's Refusal::of_tokens): the floor if the tokens alone
  -- are there now, else the tokens; and the pause while one is in effect.
  reason = 1
  if floor_tokens then
    local alone_s, alone_n = wait_tokens(quota, b, factor, tokens, nil)
    if alone_s == 0 and alone_n == 0 then
      reason = 2
    end
  end
  local pushback = b.pushback
  if pushback and lt(b.now_s, b.now_n, pushback.until_s, pushback.until_n) then
    reason = reason + 8
  end
  return granted, wait_s, wait_n, nil, nil, after_s, after_n, reason
end

-- A take with INFLIGHT from a bucket whose table has a line, or by a call with LINE: the
-- module's take with a line, step by step. The line first: a slot free since (a holder's lease
-- ran out) goes to its head before this call, which may be the head's own look. Then the call:
-- without LINE, a take of tokens and a slot that never overtakes the line; with WAITER id of a
-- slot held (handed to it), granted, its tokens taken at the hand-off (no ticket: nothing of
-- this call's to give back), its lease renewed to a whole one from now if it learns late; with
-- WAITER id of a place in line, its place renewed; else a take of a slot if one is free and
-- nobody waits, or a place at the back of the line if its tokens alone would be granted.
-- Writes, announces the first waiter the settling handed a slot (`handed <id> <wait_ms>`, as
-- RELEASE does) if it wrote, and replies.
local function take_in_line(key, quota, b, slots, kept, tokens, max_wait_ms, floor_tokens, cap,
    lease_ms, place_ms, waiter_id, ticket)
  local now_s, now_n = b.now_s, b.now_n
  local factor = b.factor
  local handed, given = 0, nil
  if slots and slots.line then
    local tat_s, tat_n, settled
    tat_s, tat_n, settled, given = settle(quota, b, b.base_s, b.base_n,
      pruned(slots, now_s, now_n), cap)
    b, slots, handed = view_at(b, tat_s, tat_n), settled, #given
  end
  -- The outcome: granted, wait, debt after, the slot (or ticket), the place, the reason, and
  -- the write {tat_s, tat_n, table} (nil: none).
  local o
  -- The settling's write, if it handed a slot, for a call that writes nothing of its own.
  local function or_settled(out)
    if not out.write and handed > 0 then
      out.write = { b.base_s, b.base_n, slots }
    end
    return out
  end
  -- A take of tokens and a slot, granted only if a slot is free under the cap: `full` if none
  -- is (every slot held, or callers in line ahead). The module's take_slot.
  local function take_slot(full)
    local granted, wait_s, wait_n, tat_s, tat_n, after_s, after_n, reason =
      take_tokens(quota, b, factor, tokens, max_wait_ms, floor_tokens)
    local held, first_s, first_n = held_at(slots, now_s, now_n)
    if full or held >= cap then
      if first_s then
        wait_s, wait_n = max(wait_s, wait_n, sub2(first_s, first_n, now_s, now_n))
      end
      return { granted = 0, wait_s = wait_s, wait_n = wait_n, after_s = b.debt_s,
        after_n = b.debt_n, slot = 0, reason = reason + 4 }
    end
    if granted == 0 then
      return { granted = 0, wait_s = wait_s, wait_n = wait_n, after_s = after_s,
        after_n = after_n, slot = 0, reason = reason }
    end
    if not tat_s then
      tat_s, tat_n = b.base_s, b.base_n
    end
    local table_after, id = with_new_slot(slots, now_s, now_n, lease_ms)
    if not table_after then
      -- No id left (a forged table): the slot is what could not be taken.
      return { granted = 0, wait_s = 0, wait_n = 0, after_s = b.debt_s, after_n = b.debt_n,
        slot = 0, reason = 4 }
    end
    return { granted = 1, wait_s = wait_s, wait_n = wait_n, after_s = after_s,
      after_n = after_n, slot = id, write = { tat_s, tat_n, table_after } }
  end
  -- Denied in line at `place` with ticket `id`, writing `table` (its join, or its place
  -- renewed): the wait is when to look again.
  local function waiting(table_after, id, place)
    local wait_s, wait_n, reason = look_again(table_after, now_s, now_n, place_ms, id, place)
    return { granted = 0, wait_s = wait_s, wait_n = wait_n, after_s = b.debt_s,
      after_n = b.debt_n, slot = id, place = place, reason = reason,
      write = { b.base_s, b.base_n, table_after } }
  end
  if not place_ms then
    o = or_settled(take_slot(in_line(slots, now_s, now_n)))
  else
    local place_s, place_n = add(now_s, now_n, ms_pair(place_ms))
    if waiter_id then
      -- Handed a slot: granted, its tokens taken at the hand-off; the wait until they are
      -- there (its lease runs from then). A waiter that learns of it late still has a whole
      -- lease from now: the slot's lease renewed, and written, only if that ends later.
      local one = held_slot(slots, waiter_id, now_s, now_n)
      if one then
        local ws, wn = sub2(one[2], one[3], ms_pair(lease_ms))
        ws, wn = sub2(ws, wn, now_s, now_n)
        if ws < 0 then
          ws, wn = 0, 0
        end
        o = { granted = 1, wait_s = ws, wait_n = wn, after_s = b.debt_s, after_n = b.debt_n,
          slot = waiter_id, handed_look = true }
        local end_s, end_n = add(now_s, now_n, ws, wn)
        end_s, end_n = add(end_s, end_n, ms_pair(lease_ms))
        if lt(one[2], one[3], end_s, end_n) then
          o.write = { b.base_s, b.base_n, with_lease(slots, now_s, now_n, waiter_id, end_s, end_n) }
        end
        o = or_settled(o)
      end
      -- Still in line: its place renewed.
      local place = not o and place_of(slots, now_s, now_n, waiter_id)
      if place then
        o = waiting(renewed_place(slots, now_s, now_n, waiter_id, place_s, place_n), waiter_id,
          place)
      end
      -- Neither (it left, or never joined): a take like any other.
    end
    if not o then
      local held = held_at(slots, now_s, now_n)
      local waiters = in_line(slots, now_s, now_n)
      if held < cap and not waiters then
        o = or_settled(take_slot(false))
      elseif take_tokens(quota, b, factor, tokens, max_wait_ms, nil) == 0 then
        -- Held back by its tokens too: it waits for those, not in line.
        o = or_settled(take_slot(true))
      else
        local table_after, full, id = joined(slots, now_s, now_n, cap, place_s, place_n,
          lease_ms, tokens)
        if full then
          return fail(full)
        end
        if table_after then
          o = waiting(table_after, id, #table_after.line)
        else
          o = or_settled(take_slot(true))
        end
      end
    end
  end
  local write = o.write
  if write then
    store(key, write[1], write[2], b.pushback, now_s, now_n, write[3], kept)
    -- A waiter whose holder's lease ran out goes ahead at once.
    announce_handed(key, given)
  end
  local reply = {
    o.granted,
    remaining(quota, o.after_s, o.after_n, factor),
    ceil_ms(o.wait_s, o.wait_n),
    ceil_ms(o.after_s, o.after_n),
  }
  if ticket then
    -- Only a grant that took tokens has a ticket; a denial that wrote (a join) has none, nor
    -- a handed look (its tokens were taken at the hand-off).
    reply[#reply + 1] = (o.granted == 1 and tokens > 0 and write and not o.handed_look)
      and ticket_of(write[1], write[2]) or 0
  end
  reply[#reply + 1] = o.slot
  if place_ms then
    reply[#reply + 1] = o.place or 0
  end
  if o.granted == 0 then
    reply[#reply + 1] = o.reason
  end
  return reply
end

-- TAKE's own, for its fast path. redis.call and redis.pcall, captured on the first call: an
-- upvalue is one VM step, `redis.call` a global and a field lookup. TIME's seconds, the last
-- text read and its number: they change once a second, so most calls compare the text (equal
-- strings are one object in Lua: a pointer compare) instead of converting it. And the reply,
-- one table reused (below). In a block of their own, closed at its end: the script builds
-- every function on each call, and Lua 5.1 finds each function's upvalues by walking the open
-- ones, so four more left open would make every later function slower to build.
local take
do
  local rcall, rpcall, SECONDS_TEXT, SECONDS = nil, nil, nil, 0
  local REPLY = { 0, 0, 0, 0, 0, 0 } -- six slots: TICKET's, then a denial's reason

  -- THROTTLE.TAKE key capacity rate [TOKENS n] [MAXWAIT ms] [TICKET] [FLOOR f] [INFLIGHT n]
  -- [LEASE ms] [LINE place_ms] [WAITER id]. With LINE, the place in line after the slot (0:
  -- not in line). A denial's reply ends with what held it back, a sum of 1 (the tokens), 2 (the
  -- floor), 4 (every slot held), 8 (a pause in effect) and 16 (in line): the module's
  -- Refusal.
  function take(keys, args, quota) -- the local above
    local count, err = #args, nil
    local tokens_text, wait_text, floor_text, ticket = nil, nil, nil, false
    local inflight_text, lease_text, line_text, waiter_text
    local i = 3
    while i <= count do
      local name = args[i]
      -- What the client sends comes first (upper case, each once, with its value); anything
      -- else is compared upper-cased, and errors are told there.
      if name == 'MAXWAIT' and not wait_text and i < count then
        wait_text, i = args[i + 1], i + 2
      elseif name == 'TICKET' and not ticket then
        ticket, i = true, i + 1
      elseif name == 'TOKENS' and not tokens_text and i < count then
        tokens_text, i = args[i + 1], i + 2
      else
        name = string.upper(name)
        if name == 'TICKET' then
          if ticket then
            return fail('repeated', 'TICKET')
          end
          ticket = true
          i = i + 1
        else
          if name ~= 'TOKENS' and name ~= 'MAXWAIT' and name ~= 'FLOOR' and name ~= 'INFLIGHT'
            and name ~= 'LEASE' and name ~= 'LINE' and name ~= 'WAITER' then
            return fail('take_option')
          end
          local value = args[i + 1]
          if not value then
            return fail('missing', name, name)
          end
          if (name == 'TOKENS' and tokens_text) or (name == 'MAXWAIT' and wait_text)
            or (name == 'FLOOR' and floor_text) or (name == 'INFLIGHT' and inflight_text)
            or (name == 'LEASE' and lease_text) or (name == 'LINE' and line_text)
            or (name == 'WAITER' and waiter_text) then
            return fail('repeated', name)
          end
          if name == 'TOKENS' then
            tokens_text = value
          elseif name == 'MAXWAIT' then
            wait_text = value
          elseif name == 'FLOOR' then
            floor_text = value
          elseif name == 'INFLIGHT' then
            inflight_text = value
          elseif name == 'LEASE' then
            lease_text = value
          elseif name == 'LINE' then
            line_text = value
          else
            waiter_text = value
          end
          i = i + 2
        end
      end
    end
    -- (Only a call with a slot option pays for the check: a plain take has none.)
    if inflight_text or lease_text or line_text or waiter_text then
      local wrong = check_slot_options(inflight_text, lease_text, line_text, waiter_text,
        floor_text)
      if wrong then
        return fail(wrong)
      end
    end
    local tokens, max_wait_ms, floor_tokens = 1, 0, nil
    if tokens_text then
      tokens = WHOLES[tokens_text] -- read before: no function call
      if not tokens or tokens > quota.capacity then
        tokens, err = parse_tokens(tokens_text, quota.capacity)
        if not tokens then
          return fail(err, quota.capacity)
        end
      end
    end
    if wait_text then
      max_wait_ms = WHOLES[wait_text]
      if not max_wait_ms or max_wait_ms > MAX_WAIT_MS then
        max_wait_ms, err = parse_max_wait(wait_text)
        if not max_wait_ms then
          return fail(err)
        end
      end
    end
    if floor_text then
      floor_tokens = parse_floor(floor_text, tokens, quota.capacity)
      if not floor_tokens then
        return fail('floor', quota.capacity)
      end
    end
    local cap, lease_ms, place_ms, waiter_id
    if inflight_text then
      local slot_options, wrong = parse_slot_options(inflight_text, lease_text, line_text,
        waiter_text)
      if not slot_options then
        return fail(wrong)
      end
      cap, lease_ms, place_ms, waiter_id = unpack(slot_options)
    end

    local key = keys[1]
    if not rcall then
      rcall, rpcall = redis.call, redis.pcall
    end
    local time = rcall('TIME') -- clock(), inlined, with its seconds cached
    local now_text = time[1]
    if now_text ~= SECONDS_TEXT then
      SECONDS_TEXT, SECONDS = now_text, tonum(now_text)
    end
    local now_s, now_n = SECONDS, time[2] * 1000
    if now_s >= MAX_NOW_S then
      now_s, now_n = MAX_NOW_S, 0
    end
    local stored = rpcall('GET', key)
    local state_s, state_n, pushback, read_err
    local fill = quota.fill
    if fill and not cap and (not stored or #stored == 8) then
      -- The fast path: a bucket that fills within 2^51 ns, neither paused nor cut (8 bytes or
      -- none), in debt by less than that: every duration is an exact double.
      local base_s, base_n, debt = now_s, now_n, 0
      if stored then
        local b1, b2, b3, b4, b5, b6, b7, b8 = byte(stored, 1, 8)
        if b8 < 128 then
          -- bytes_pair and plausible, inlined: two Lua calls fewer on the hot path.
          local lo = b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
          local h0, h1 = b5 + b6 * 256, b7 + b8 * 256
          local n = h1 * 976710656 + h0 * 294967296 + lo
          state_n = n % E9
          state_s = h1 * 281474 + h0 * 4 + (n - state_n) / E9
          local latest_s = now_s + LATEST_AHEAD_S
          if (state_s < EARLIEST_S and now_s >= EARLIEST_S) or latest_s < state_s
            or (latest_s == state_s and now_n < state_n) then
            return fail('not_bucket')
          end
          if state_s > now_s or (state_s == now_s and state_n > now_n) then
            local ds = state_s - now_s
            if ds < SMALL_S then
              base_s, base_n, debt = state_s, state_n, ds * E9 + (state_n - now_n)
            else
              debt = nil
            end
          end
        else
          debt = nil -- not a bucket: the general path says so
        end
      end
      if debt then
        local interval = quota.interval
        local granted, wait, taken, after, reason = 1, 0, 0, debt, 0
        if tokens > 0 then
          local cost = tokens * interval
          local need, short_now = cost, false
          if floor_tokens then
            need = need + floor_tokens * interval
            -- A floor above 0 reserves only tokens that are there now: never a debt.
            short_now = floor_tokens > 0 and debt + cost > fill
          end
          wait = debt + need - fill
          if wait < 0 then
            wait = 0
          end
          granted = 0
          if wait <= max_wait_ms * 1e6 and not short_now then
            local cost_n = cost % E9
            local tat_s, tat_n = base_s + (cost - cost_n) / E9, base_n + cost_n
            if tat_n >= E9 then
              tat_s, tat_n = tat_s + 1, tat_n - E9
            end
            local sub_ms = tat_n % 1e6
            local expire = tat_s * 1000 + (tat_n - sub_ms) / 1e6
            if sub_ms > 0 then
              expire = expire + 1
            end
            rcall('SET', key, pair_le(tat_s, tat_n), 'PXAT', expire)
            local sub_us = tat_n % 1000
            granted, taken, after = 1, tat_s * 1e6 + (tat_n - sub_us) / 1000, debt + cost
          elseif floor_tokens and debt + cost <= fill then
            reason = 2 -- the tokens are there now, the floor behind them is not
          else
            reason = 1 -- (8 bytes or none: never paused)
          end
        end
        local left = 0
        if after < fill then
          local room = fill - after
          left = (room - room % interval) / interval
        end
        -- Both in whole ms, rounded up.
        local wait_ms, reset_ms = wait % 1e6, after % 1e6
        wait_ms = (wait - wait_ms) / 1e6 + (wait_ms > 0 and 1 or 0)
        reset_ms = (after - reset_ms) / 1e6 + (reset_ms > 0 and 1 or 0)
        -- One table for every reply of the fast path: the server converts it as soon as the
        -- function returns, so no call ever sees another's (a table fewer to build and collect).
        local reply = REPLY
        reply[1], reply[2], reply[3], reply[4] = granted, left, wait_ms, reset_ms
        local n = 5
        if ticket then
          reply[5], n = taken, 6
        end
        -- A denial ends with what held it back; a grant's reply is as it always was.
        if granted == 0 then
          reply[n], n = reason, n + 1
        end
        reply[n] = nil -- the reply ends at the first nil
        return reply
      end
    end
    local slots, kept
    state_s, state_n, pushback, read_err, slots, kept = state_of(stored, now_s, now_n)
    if read_err then
      return fail(read_err)
    end
    if kept then
      quota = kept.q -- a quota kept at the server wins over the caller's
    end
    local base_s, base_n, debt_s, debt_n, factor = view(state_s, state_n, pushback, now_s, now_n)
    local b = { base_s = base_s, base_n = base_n, debt_s = debt_s, debt_n = debt_n,
      now_s = now_s, now_n = now_n, pushback = pushback, factor = factor }
    local granted, wait_s, wait_n, tat_s, tat_n, after_s, after_n, reason =
      take_tokens(quota, b, factor, tokens, max_wait_ms, floor_tokens)
    local taken = tat_s and ticket_of(tat_s, tat_n) or 0
    if cap and (place_ms or (slots and slots.line)) then
      return take_in_line(key, quota, b, slots, kept, tokens, max_wait_ms, floor_tokens, cap,
        lease_ms, place_ms, waiter_id, ticket)
    end
    local slot
    if cap then
      -- The slot: granted only with the tokens, and only if fewer than `cap` slots are held
      -- now; the module's take, step by step. The lease runs from now.
      local held, first_s, first_n = held_at(slots, now_s, now_n)
      slot = 0
      if held >= cap then
        -- Every slot held: nothing taken, the wait until the first lease ends (or the
        -- tokens', if longer), the bucket as it stands.
        wait_s, wait_n = max(wait_s, wait_n, sub2(first_s, first_n, now_s, now_n))
        granted, taken, after_s, after_n = 0, 0, b.debt_s, b.debt_n
        reason = reason + 4
      elseif granted == 1 then
        if tokens == 0 then
          tat_s, tat_n = b.base_s, b.base_n
        end
        local id = now_s * 1e6 + floor(now_n / 1000)
        if slots and slots.next > id then
          id = slots.next
        end
        if id >= MAX_SLOT_ID then
          -- No id left (a forged table): nothing taken, the bucket as it stands; the slot is
          -- what could not be taken.
          granted, taken, wait_s, wait_n, after_s, after_n = 0, 0, 0, 0, b.debt_s, b.debt_n
          reason = 4
        else
          local end_s, end_n = add(now_s, now_n, ms_pair(lease_ms))
          local table_after = { next = id + 1 }
          for k = 1, slots and #slots or 0 do
            table_after[k] = slots[k]
          end
          table_after[#table_after + 1] = { id, end_s, end_n }
          slots, slot = table_after, id
        end
      end
      if tokens == 0 then
        taken = 0 -- a slot taken with no tokens took nothing a ticket could give back
      end
    end
    if granted == 1 and tat_s then
      store(key, tat_s, tat_n, b.pushback, b.now_s, b.now_n, slots, kept)
    end
    local reply = {
      granted,
      remaining(quota, after_s, after_n, factor),
      ceil_ms(wait_s, wait_n),
      ceil_ms(after_s, after_n),
    }
    if ticket then
      reply[#reply + 1] = taken
    end
    if slot then
      reply[#reply + 1] = slot
    end
    if granted == 0 then
      reply[#reply + 1] = reason
    end
    return reply
  end
end

-- THROTTLE.MTAKE numkeys key [key ...] capacity rate tokens [...] [MAXWAIT ms] [FLOOR f ...]
-- [TICKET] [INFLIGHT n LEASE ms] [LINE place_ms [WAITER id]]. With LINE, the place in the first
-- bucket's line after the slot. A denial ends with what held it back, as take's.
local function mtake(keys, args)
  local count, nargs = #keys, #args
  -- The server's arity check first: the module's call has numkeys, the keys and what follows.
  if 2 + count + nargs < 6 then
    return fail('arity', 'mtake')
  end
  if count < 1 or count > MAX_KEYS then
    return fail('numkeys')
  end
  if nargs < 3 * count then
    return fail('triples', count)
  end
  for i = 1, count do
    for j = i + 1, count do
      if keys[i] == keys[j] then
        return fail('duplicate')
      end
    end
  end
  local quotas, tokens = {}, {}
  for i = 1, count do
    local at = 3 * i - 2
    local quota, err = parse_quota(args[at], args[at + 1])
    if not quota then
      return fail(err)
    end
    local n
    n, err = parse_tokens(args[at + 2], quota.capacity)
    if not n then
      return fail(err, quota.capacity)
    end
    quotas[i], tokens[i] = quota, n
  end
  -- The options of one value, by name: their text.
  local texts, floors_at, ticket = {}, nil, false
  local i = 3 * count + 1
  while i <= nargs do
    local name = string.upper(args[i])
    if name == 'TICKET' then
      if ticket then
        return fail('repeated', 'TICKET')
      end
      ticket = true
      i = i + 1
    elseif name == 'FLOOR' then
      if nargs - i < count then
        return fail('floors', count)
      end
      if floors_at then
        return fail('repeated', 'FLOOR')
      end
      floors_at = i + 1
      i = i + 1 + count
    elseif name == 'MAXWAIT' or name == 'INFLIGHT' or name == 'LEASE' or name == 'LINE'
        or name == 'WAITER' then
      local value = args[i + 1]
      if not value then
        return fail('missing', name, name)
      end
      if texts[name] then
        return fail('repeated', name)
      end
      texts[name] = value
      i = i + 2
    else
      return fail('mtake_option')
    end
  end
  local wait_text, inflight_text, lease_text, line_text, waiter_text =
    texts.MAXWAIT, texts.INFLIGHT, texts.LEASE, texts.LINE, texts.WAITER
  local wrong = check_slot_options(inflight_text, lease_text, line_text, waiter_text, floors_at)
  if wrong then
    return fail(wrong)
  end
  local max_wait_ms = 0
  if wait_text then
    local err
    max_wait_ms, err = parse_max_wait(wait_text)
    if not max_wait_ms then
      return fail(err)
    end
  end
  local floors
  if floors_at then
    floors = {}
    for k = 1, count do
      floors[k] = parse_floor(args[floors_at + k - 1], tokens[k], quotas[k].capacity)
      if not floors[k] then
        return fail('floor', quotas[k].capacity)
      end
    end
  end
  local cap, lease_ms, place_ms, waiter_id
  if inflight_text then
    local slot_options, wrong = parse_slot_options(inflight_text, lease_text, line_text,
      waiter_text)
    if not slot_options then
      return fail(wrong)
    end
    cap, lease_ms, place_ms, waiter_id = unpack(slot_options)
  end

  -- Every bucket is read (and its type checked) before anything is written.
  local now_s, now_n = clock()
  local buckets = {}
  for k = 1, count do
    local s, n, pushback, err, slots, kept = state_of(redis.pcall('GET', keys[k]), now_s, now_n)
    if err then
      return fail(err)
    end
    if kept then
      quotas[k] = kept.q -- a quota kept at the server wins over the caller's
    end
    local b = { pushback = pushback, now_s = now_s, now_n = now_n, slots = slots, kept = kept }
    b.base_s, b.base_n, b.debt_s, b.debt_n, b.factor = view(s, n, pushback, now_s, now_n)
    buckets[k] = b
  end
  -- The first bucket's line, settled first (the module's mtake, as take's): a slot free since
  -- (a holder's lease ran out) goes to its head, before this call, which may be its own look.
  local given = {}
  local first = buckets[1]
  if cap and first.slots and first.slots.line then
    local tat_s, tat_n, settled
    tat_s, tat_n, settled, given = settle(quotas[1], first, first.base_s, first.base_n,
      pruned(first.slots, now_s, now_n), cap)
    first.base_s, first.base_n, first.slots = tat_s, tat_n, settled
    first.debt_s, first.debt_n = sub2(tat_s, tat_n, now_s, now_n)
  end

  -- The wait is the longest of the buckets' own waits (with their floors). A bucket with a
  -- floor above 0 must hold its own tokens now: it never goes into debt.
  local wait_s, wait_n, takes_any = 0, 0, false
  for k = 1, count do
    local b = buckets[k]
    b.cost_s, b.cost_n = cost(quotas[k], tokens[k], b.factor)
    -- A bucket asked for nothing is only inspected: its debt delays no one.
    if tokens[k] > 0 then
      wait_s, wait_n = max(wait_s, wait_n,
        wait_tokens(quotas[k], b, b.factor, tokens[k], floors and floors[k]))
      takes_any = true
    end
  end
  local limit_s, limit_n = ms_pair(max_wait_ms)
  local granted = takes_any and not lt(limit_s, limit_n, wait_s, wait_n)

  -- All the tokens are used at one instant, after the longest wait, so each bucket takes
  -- them as of then: max(base, now + wait) + cost. A bucket with a floor above 0 is never left
  -- in debt (its tokens are there now, and the wait does not put its slot past its fill). A
  -- state more than 20 years ahead (a deep cut) or past i64 (a forged one) refuses the whole
  -- call.
  if granted then
    local act_s, act_n = add(now_s, now_n, wait_s, wait_n)
    for k = 1, count do
      local b = buckets[k]
      if tokens[k] > 0 then
        local s, n = max(b.base_s, b.base_n, act_s, act_n)
        b.tat_s, b.tat_n = add(s, n, b.cost_s, b.cost_n)
        if floors and floors[k] > 0 then
          local ahead_s, ahead_n = sub2(b.tat_s, b.tat_n, now_s, now_n)
          granted = granted and not lt(quotas[k].fill_s, quotas[k].fill_n, ahead_s, ahead_n)
        end
        granted = granted and writable(b.tat_s, b.tat_n, b)
      end
    end
  end
  -- A call of 0 tokens is granted (it only inspects, or takes a slot), with no wait.
  local tokens_granted = granted or not takes_any
  local reason = 0
  if not tokens_granted then
    -- What held the tokens back (the module's refused_tokens_of): the floor if every bucket
    -- has its tokens alone now, else the tokens; and the pause while one is in effect on a
    -- bucket asked for tokens.
    reason = 1
    local paused = false
    local alone = floors ~= nil
    for k = 1, count do
      local b = buckets[k]
      if tokens[k] > 0 then
        if alone then
          local s, n = wait_tokens(quotas[k], b, b.factor, tokens[k], nil)
          alone = s == 0 and n == 0
        end
        local p = b.pushback
        if p and lt(now_s, now_n, p.until_s, p.until_n) then
          paused = true
        end
      end
    end
    if alone then
      reason = 2
    end
    if paused then
      reason = reason + 8
    end
  end
  if not takes_any then
    wait_s, wait_n = 0, 0
  end
  granted = tokens_granted
  -- The slot, in the first key's bucket (the module's mtake::take_slot, step by step): taken
  -- with every bucket's tokens if one is free under the cap and nobody waits; with WAITER id of
  -- a slot handed to it, confirmed with the tokens (its lease from when they are there), or
  -- without them passed on down the line; with WAITER id of a place in line, that place
  -- renewed; with LINE and the tokens granted, a place at the back of the line for the slot
  -- alone. `line_write` {tat_s, tat_n, table} is what a denial writes to the first bucket.
  local slot, place, line_write = nil, 0, nil
  if cap then
    local b = first
    local slots = b.slots
    local held, first_s, first_n = held_at(slots, now_s, now_n)
    slot = 0
    local handed_slot = waiter_id and held_slot(slots, waiter_id, now_s, now_n)
    local in_place = waiter_id and not handed_slot and place_of(slots, now_s, now_n, waiter_id)
    -- Denied in line at `at` with ticket `id`, writing `table_after`: the wait is when to
    -- look again.
    local function waiting(table_after, id, at)
      granted = false
      wait_s, wait_n, reason = look_again(table_after, now_s, now_n, place_ms, id, at)
      slot, place, line_write = id, at, { b.base_s, b.base_n, table_after }
    end
    if handed_slot and not tokens_granted then
      -- Its tokens not there in time: the slot goes on down the line at once.
      local rest = with_slot(b, waiter_id, function()
        return nil
      end)
      local tat_s, tat_n, table_after, more = settle(quotas[1], b, b.base_s, b.base_n,
        pruned(rest, now_s, now_n), cap)
      for k = 1, #more do
        given[#given + 1] = more[k]
      end
      line_write = { tat_s, tat_n, table_after }
    elseif handed_slot then
      -- Handed a slot: its lease runs from when the tokens are there, renewed only if that
      -- ends later.
      local end_s, end_n = add(now_s, now_n, wait_s, wait_n)
      end_s, end_n = add(end_s, end_n, ms_pair(lease_ms))
      local table_after = pruned(slots, now_s, now_n)
      if lt(handed_slot[2], handed_slot[3], end_s, end_n) then
        table_after = with_lease(slots, now_s, now_n, waiter_id, end_s, end_n)
      end
      b.slots, slot = table_after, waiter_id
      if not b.tat_s then
        b.tat_s, b.tat_n = b.base_s, b.base_n
      end
    elseif in_place then
      -- Still in line: its place renewed.
      local place_s, place_n = add(now_s, now_n, ms_pair(place_ms))
      waiting(renewed_place(slots, now_s, now_n, waiter_id, place_s, place_n), waiter_id,
        in_place)
    elseif held < cap and not in_line(slots, now_s, now_n) then
      if tokens_granted then
        local table_after, id = with_new_slot(slots, now_s, now_n, lease_ms)
        if not table_after then
          -- No id left (a forged table): nothing taken, no wait to give.
          granted, wait_s, wait_n, reason = false, 0, 0, 4
        else
          b.slots, slot = table_after, id
          if not b.tat_s then
            -- No tokens from the first bucket: its state stays, now holding the slot.
            b.tat_s, b.tat_n = b.base_s, b.base_n
          end
        end
      end
    elseif place_ms and tokens_granted then
      -- Every slot held, or callers in line ahead: a place at the back of the line, for the
      -- slot alone (its tokens are taken at its look).
      local place_s, place_n = add(now_s, now_n, ms_pair(place_ms))
      local table_after, full, id = joined(slots, now_s, now_n, cap, place_s, place_n, lease_ms,
        0)
      if full then
        return fail(full)
      end
      if table_after then
        waiting(table_after, id, #table_after.line)
      else
        granted, wait_s, wait_n, reason = false, 0, 0, 4
      end
    else
      -- Every slot held: nothing taken, the wait until the first lease ends (or the tokens',
      -- if longer), every bucket as it stands.
      if first_s then
        wait_s, wait_n = max(wait_s, wait_n, sub2(first_s, first_n, now_s, now_n))
      end
      granted = false
      reason = reason + 4
    end
    if not line_write and #given > 0 then
      -- The settling's write, for a call denied with no write of its own.
      line_write = { b.base_s, b.base_n, b.slots }
    end
  end
  local reply = { granted and 1 or 0, ceil_ms(wait_s, wait_n) }
  local first_written = false
  for k = 1, count do
    local b = buckets[k]
    local debt_s, debt_n = b.debt_s, b.debt_n
    if granted and b.tat_s then
      store(keys[k], b.tat_s, b.tat_n, b.pushback, now_s, now_n, b.slots, b.kept)
      debt_s, debt_n = sub2(b.tat_s, b.tat_n, now_s, now_n)
      first_written = first_written or k == 1
    elseif k == 1 and not granted and line_write then
      store(keys[1], line_write[1], line_write[2], b.pushback, now_s, now_n, line_write[3],
        b.kept)
      debt_s, debt_n = sub2(line_write[1], line_write[2], now_s, now_n)
      first_written = true
    end
    reply[2 * k + 1] = remaining(quotas[k], debt_s, debt_n, b.factor)
    reply[2 * k + 2] = ceil_ms(debt_s, debt_n)
  end
  -- One ticket per key after the pairs: the state it was left at in µs, as THROTTLE.TAKE's;
  -- 0 where nothing was taken (a denial, a key asked for 0 tokens, even one holding the slot).
  if ticket then
    for k = 1, count do
      local b = buckets[k]
      reply[2 * count + 2 + k] = (granted and tokens[k] > 0) and ticket_of(b.tat_s, b.tat_n)
        or 0
    end
  end
  -- After the writes: a waiter whose holder's lease ran out (or whose handed slot this call
  -- passed on) goes ahead at once.
  if first_written then
    announce_handed(keys[1], given)
  end
  -- With INFLIGHT: the slot's id (0: not granted; in line, the ticket); with LINE, the place.
  if slot then
    reply[#reply + 1] = slot
  end
  if place_ms then
    reply[#reply + 1] = place
  end
  -- On a denial, last: what held it back.
  if not granted then
    reply[#reply + 1] = reason
  end
  return reply
end

-- THROTTLE.PAUSE key capacity rate ms
local function pause(keys, args, quota)
  local ms = parse_ms(args[3])
  if not ms then
    return fail('pause_ms')
  end
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  local next_ms = paused(keys[1], b.quota, b, b.pushback and b.pushback.cut, ms)
  return next_ms
end

-- THROTTLE.GIVE key capacity rate n ticket: gives a take's tokens back while nothing was taken
-- after it, never beyond a full bucket (the module's give-back rule).
local function give(keys, args, quota)
  local n = whole(args[3], quota.capacity)
  if not n then
    return fail('give_tokens', quota.capacity)
  end
  -- The ticket is kept as text: it may pass 2^53 (MAX_TICKET has 16 digits).
  local ticket = args[4]
  if ticket == '' or find(ticket, '%D') then
    return fail('ticket')
  end
  local first = find(ticket, '[^0]')
  ticket = first and sub(ticket, first) or ''
  if #ticket > #MAX_TICKET or (#ticket == #MAX_TICKET and ticket > MAX_TICKET) then
    return fail('ticket')
  end
  -- ticket µs * 1000 as a pair.
  local ticket_s = tonum(sub(ticket, 1, -7)) or 0
  local ticket_n = (tonum(sub(ticket, -6)) or 0) * 1000

  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  if not b.state_s then
    return 0 -- a missing key is a full bucket: nothing to give back to
  end
  -- Only while the state is still this take's slot end: within the ticket's rounding (999 ns)
  -- when a token takes longer than that, exactly on it otherwise. Before it: reset since, or
  -- given back already.
  local since_s, since_n = sub2(b.state_s, b.state_n, ticket_s, ticket_n)
  local rounding = 0
  if b.quota.interval > 999 then
    rounding = 999
  end
  if since_s ~= 0 or since_n > rounding then
    return 0
  end
  -- At the configured rate, the least the take can have cost: a cut since makes tokens cost
  -- more, and giving that much back would free part of the slot before this take's. Never
  -- beyond a full bucket (now), and never into a pause set since the take.
  local back_s, back_n = mul(n, b.quota.interval)
  local tat_s, tat_n = sub2(b.base_s, b.base_n, back_s, back_n)
  tat_s, tat_n = max(tat_s, tat_n, b.now_s, b.now_n)
  local pushback = b.pushback
  if pushback and lt(b.now_s, b.now_n, pushback.until_s, pushback.until_n) then
    tat_s, tat_n = max(tat_s, tat_n,
      paused_state(b.quota, pushback.until_s, pushback.until_n, pushback.cut))
  end
  if not lt(tat_s, tat_n, b.base_s, b.base_n) then
    return 0
  end
  -- What was freed, in tokens rounded up (the last one may be part of a token's time).
  local freed_s, freed_n = sub2(b.base_s, b.base_n, tat_s, tat_n)
  local given, rest = divmod(freed_s, freed_n, b.quota.interval)
  if rest > 0 then
    given = given + 1
  end
  if given > n then
    given = n
  end
  store(keys[1], tat_s, tat_n, pushback, b.now_s, b.now_n, b.slots, b.kept)
  return given
end

-- THROTTLE.PEEK key capacity rate: what TOKENS 0 replies, then the pause and the rate's
-- factor; never a write.
local function peek(keys, _, quota)
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  local paused_ms = 0
  local pushback = b.pushback
  if pushback and lt(b.now_s, b.now_n, pushback.until_s, pushback.until_n) then
    paused_ms = ceil_ms(sub2(pushback.until_s, pushback.until_n, b.now_s, b.now_n))
  end
  return {
    1, remaining(b.quota, b.debt_s, b.debt_n, b.factor), 0, ceil_ms(b.debt_s, b.debt_n),
    paused_ms, b.factor,
  }
end

-- THROTTLE.CUT key capacity rate ms factor recovery_ms
local function cut(keys, args, quota)
  local ms = parse_ms(args[3])
  if not ms then
    return fail('pause_ms')
  end
  local factor = parse_factor(args[4])
  if not factor then
    return fail('factor')
  end
  local recovery = parse_ms(args[5])
  if not recovery then
    return fail('recovery')
  end
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  local pushback = b.pushback
  local stored_cut = pushback and pushback.cut
  -- A cut while the bucket is paused is the same episode: the rate is cut once.
  local same_episode = pushback and lt(b.now_s, b.now_n, pushback.until_s, pushback.until_n)
  local new_cut = stored_cut
  if not same_episode then
    local cut_factor = floor(b.factor * factor / FULL)
    if cut_factor < MIN_FACTOR then
      cut_factor = MIN_FACTOR
    end
    -- A later cut never loosens an earlier one: its factor is the lower, and it recovers no
    -- sooner than the earlier one would have.
    local recovery_new = recovery
    if stored_cut then
      local rs, rn = recovered_at(stored_cut)
      rs, rn = sub2(rs, rn, b.now_s, b.now_n)
      if rs >= 0 and ceil_ms(rs, rn) > recovery_new then
        recovery_new = ceil_ms(rs, rn)
      end
      if recovery_new > MAX_WAIT_MS then
        recovery_new = MAX_WAIT_MS
      end
    end
    new_cut = { s = b.now_s, n = b.now_n, factor = cut_factor, recovery = recovery_new }
  end
  local next_ms, wrote = paused(keys[1], b.quota, b, new_cut, ms)
  local effective = stored_cut
  if wrote then
    effective = new_cut
  end
  local factor_now, recovered_ms = FULL, 0
  if effective then
    factor_now = factor_at(effective, b.now_s, b.now_n)
    local until_s, until_n = recovered_at(effective)
    local rs, rn = sub2(until_s, until_n, b.now_s, b.now_n)
    if rs >= 0 then
      recovered_ms = ceil_ms(rs, rn)
    end
  end
  return { (wrote and not same_episode) and 1 or 0, next_ms, factor_now, recovered_ms }
end

-- THROTTLE.SYNC key capacity rate remaining reset_ms
local function sync(keys, args, quota)
  local left = whole(args[3], MAX_CAPACITY)
  if not left then
    return fail('remaining')
  end
  local reset = whole(args[4], MAX_WAIT_MS)
  if not reset then
    return fail('reset_ms')
  end
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  local tat_s, tat_n = b.base_s, b.base_n
  if remaining(b.quota, b.debt_s, b.debt_n, b.factor) > left then
    -- The debt that leaves exactly `left` whole tokens.
    local short_s, short_n = sub2(b.quota.fill_s, b.quota.fill_n, cost(b.quota, left, b.factor))
    tat_s, tat_n = max(tat_s, tat_n, add(b.now_s, b.now_n, short_s, short_n))
  end
  local lowered = lt(b.base_s, b.base_n, tat_s, tat_n)
  local wrote = false
  if left == 0 and reset > 0 then
    -- Paused from the lowered state.
    local was_s, was_n = b.base_s, b.base_n
    b.base_s, b.base_n = tat_s, tat_n
    local _, paused_wrote, paused_s, paused_n =
      paused(keys[1], b.quota, b, b.pushback and b.pushback.cut, reset)
    b.base_s, b.base_n = was_s, was_n
    wrote = paused_wrote
    if wrote then
      tat_s, tat_n = paused_s, paused_n
    end
  end
  if not wrote and lowered then
    store(keys[1], tat_s, tat_n, b.pushback, b.now_s, b.now_n, b.slots, b.kept)
    wrote = true
  end
  local debt_s, debt_n = b.debt_s, b.debt_n
  if wrote then
    debt_s, debt_n = sub2(tat_s, tat_n, b.now_s, b.now_n)
  end
  return { wrote and 1 or 0, remaining(b.quota, debt_s, debt_n, b.factor), ceil_ms(debt_s, debt_n) }
end

-- THROTTLE.DEBIT key capacity rate n
local function debit(keys, args, quota)
  local n = whole(args[3], MAX_CAPACITY)
  if not n then
    return fail('debit_tokens')
  end
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  if n == 0 then
    return { remaining(b.quota, b.debt_s, b.debt_n, b.factor), ceil_ms(b.debt_s, b.debt_n) }
  end
  -- A debt past 20 years is refused; a cost past 1e18 ns (or not a pair) is past it for sure.
  local cost_s, cost_n
  if n * b.quota.interval <= 1e18 then
    cost_s, cost_n = cost(b.quota, n, b.factor)
  end
  local debt_s, debt_n
  if cost_s then
    debt_s, debt_n = add(b.debt_s, b.debt_n, cost_s, cost_n)
  end
  if not debt_s or lt(MAX_DEBT_S, 0, debt_s, debt_n) then
    return fail('too_deep')
  end
  local tat_s, tat_n = add(b.base_s, b.base_n, cost_s, cost_n)
  store(keys[1], tat_s, tat_n, b.pushback, b.now_s, b.now_n, b.slots, b.kept)
  return { remaining(b.quota, debt_s, debt_n, b.factor), ceil_ms(debt_s, debt_n) }
end

-- THROTTLE.RENEW key capacity rate slot ms
local function renew(keys, args)
  local id = parse_slot(args[3])
  if not id then
    return fail('slot_id')
  end
  local ms = parse_ms(args[4])
  if not ms then
    return fail('lease')
  end
  local b, err = open(keys[1])
  if not b then
    return fail(err)
  end
  local end_s, end_n = add(b.now_s, b.now_n, ms_pair(ms))
  local slots = with_slot(b, id, function(one)
    return { one[1], end_s, end_n }
  end)
  if not slots then
    return 0
  end
  store(keys[1], b.base_s, b.base_n, b.pushback, b.now_s, b.now_n, slots, b.kept)
  return 1
end

-- THROTTLE.RELEASE key capacity rate slot [INFLIGHT n]: with INFLIGHT, a slot freed from a
-- table that held n is announced, so that a caller waiting for one looks again at once; with
-- callers in line, the slot is handed to the head and announced as `handed <id> <wait_ms>`. A
-- waiter's ticket in line leaves the line (it gave up, or its call was cancelled): written,
-- nothing announced. 1 if the slot was held (or the ticket in line), else 0.
local function release(keys, args, quota)
  local id = parse_slot(args[3])
  if not id then
    return fail('slot_id')
  end
  local cap_text
  local i = 4
  while i <= #args do
    if string.upper(args[i]) ~= 'INFLIGHT' then
      return fail('release_option')
    end
    if i == #args then
      return fail('missing', 'INFLIGHT', 'INFLIGHT')
    end
    if cap_text then
      return fail('repeated', 'INFLIGHT')
    end
    cap_text = args[i + 1]
    i = i + 2
  end
  local cap
  if cap_text then
    cap = whole(cap_text, MAX_INFLIGHT)
    if not cap or cap < 1 then
      return fail('inflight')
    end
  end
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  local held = held_at(b.slots, b.now_s, b.now_n)
  local freed
  local slots = with_slot(b, id, function(one)
    freed = one
    return nil
  end)
  if not slots then
    -- A waiter's ticket: it leaves the line (the module's line::left_line), with no settling.
    local line = b.slots and b.slots.line
    for i = 1, line and #line or 0 do
      local w = line[i]
      if w[1] == id and lt(b.now_s, b.now_n, w[2], w[3]) then
        local table_after = pruned(b.slots, b.now_s, b.now_n)
        local rest = {}
        for j = 1, #table_after.line do
          if table_after.line[j][1] ~= id then
            rest[#rest + 1] = table_after.line[j]
          end
        end
        set_line(table_after, rest)
        store(keys[1], b.base_s, b.base_n, b.pushback, b.now_s, b.now_n, table_after, b.kept)
        return 1
      end
    end
    return 0
  end
  -- With callers in line, the freed slot (and any whose lease ran out) goes to the head of the
  -- line at once, under the cap the line waits under; its tokens are taken then.
  local tat_s, tat_n, handed = b.base_s, b.base_n, nil
  slots = pruned(slots, b.now_s, b.now_n)
  if slots and slots.line then
    -- The line learns its pace from how much lease the holders leave unused.
    slots.slack = slack_after(slots.slack, sub2(freed[2], freed[3], b.now_s, b.now_n))
    tat_s, tat_n, slots, handed = settle(b.quota, b, tat_s, tat_n, slots, slots.cap)
  end
  store(keys[1], tat_s, tat_n, b.pushback, b.now_s, b.now_n, slots, b.kept)
  -- After the write: the first waiter handed a slot hears it, with its ticket and its tokens'
  -- wait; else a slot freed from a full table is, protected too (a server that refuses it still
  -- frees the slot: the waiters find it when they look again).
  if not announce_handed(keys[1], handed) and cap and held >= cap then
    redis.pcall('SPUBLISH', pause_channel(keys[1]), 'freed')
  end
  return 1
end

-- THROTTLE.SLOTS key capacity rate: read-only.
local function slots(keys)
  local b, err = open(keys[1])
  if not b then
    return fail(err)
  end
  local held, first_s, first_n = held_at(b.slots, b.now_s, b.now_n)
  if held == 0 then
    return { 0, 0 }
  end
  return { held, ceil_ms(sub2(first_s, first_n, b.now_s, b.now_n)) }
end

-- THROTTLE.RESUME key capacity rate: an operator ends the pause and the cut now, keeping the
-- state as it is (the stored bytes cannot tell a pause's share from real takes, so no earlier
-- instant is safe) and every slot held; nothing written when neither is in effect.
local function resume(keys)
  local b, err = open(keys[1])
  if not b then
    return fail(err)
  end
  local pushback = b.pushback
  if not pushback then
    return 0
  end
  local paused = lt(b.now_s, b.now_n, pushback.until_s, pushback.until_n)
  local cut = pushback.cut and lt(b.now_s, b.now_n, recovered_at(pushback.cut))
  if not paused and not cut then
    return 0
  end
  store(keys[1], b.base_s, b.base_n, nil, b.now_s, b.now_n, b.slots, b.kept)
  return 1
end

-- THROTTLE.QUOTA key capacity rate [CLEAR]: an operator keeps the key's quota at the server,
-- so that every command on the key computes with it whatever its caller sends; CLEAR gives the
-- key back to its callers' quotas. The state instant, the pause, the cut and the slots stay;
-- the key keeps no TTL while a quota is kept. Nothing is written when nothing changes.
local function quota(keys, args, wanted)
  local kept = { q = wanted, capacity = wanted.capacity, text = canonical_rate(args[2]) }
  if #args == 3 then
    if string.upper(args[3]) ~= 'CLEAR' then
      return fail('quota_option')
    end
    kept = nil
  end
  local b, err = open(keys[1])
  if not b then
    return fail(err)
  end
  -- The bucket seen with the quota it keeps from now: the one given either way (after CLEAR,
  -- the caller's own).
  local was = b.kept
  local changed = (was == nil) ~= (kept == nil)
    or (was ~= nil and (was.capacity ~= kept.capacity or was.text ~= kept.text))
  if changed then
    store(keys[1], b.base_s, b.base_n, b.pushback, b.now_s, b.now_n, b.slots, kept)
  end
  return {
    changed and 1 or 0,
    remaining(wanted, b.debt_s, b.debt_n, b.factor),
    ceil_ms(b.debt_s, b.debt_n),
  }
end
-- Entry points -----------------------------------------------------------------------------

local COMMANDS = {
  take = take, mtake = mtake, pause = pause, give = give, peek = peek, cut = cut, sync = sync,
  debit = debit, renew = renew, release = release, slots = slots, resume = resume,
  quota = quota,
}

-- How many arguments each one-key command takes, as the module counts them: at least, and at
-- most (none for take and release: options follow). Flat tables, not a pair per command: the
-- script builds them on every call: the pairs cost 13 000 instructions a call (callgrind).
local LEAST = {
  take = 2, pause = 3, give = 4, peek = 2, cut = 5, sync = 4, debit = 3, renew = 4, release = 3,
  slots = 2, resume = 2, quota = 2,
}
local MOST = {
  pause = 3, give = 4, peek = 2, cut = 5, sync = 4, debit = 3, renew = 4, slots = 2, resume = 2,
  quota = 3,
}

-- The one-key command `name` (its key count already checked) with the start every one of them
-- shares, in the module's order: the arity, then the quota (capacity, rate). The command is
-- given the quota and checks its own arguments after it.
local function one_key(name)
  local command, least, most = COMMANDS[name], LEAST[name], MOST[name]
  return function(keys, args)
    local count = #args
    if count < least or (most and count > most) then
      return fail('arity', name)
    end
    -- parse_quota's own cache, read here first: a hot key's call makes no function call.
    local by_capacity = QUOTAS[args[2]]
    local quota = by_capacity and by_capacity[args[1]]
    if not quota then
      local err
      quota, err = parse_quota(args[1], args[2])
      if not quota then
        return fail(err)
      end
    end
    return command(keys, args, quota)
  end
end

if redis.register_function then
  -- The library: one function per command, `throttle_<command>`.
  local function entry(name)
    local command = name == 'mtake' and mtake or one_key(name)
    return function(keys, args)
      if not floor then
        std()
      end
      if name ~= 'mtake' and #keys ~= 1 then
        return fail('one_key_function', name, name, USAGE[name])
      end
      return command(keys, args)
    end
  end
  redis.register_function('throttle_take', entry('take'))
  redis.register_function('throttle_mtake', entry('mtake'))
  redis.register_function('throttle_pause', entry('pause'))
  redis.register_function('throttle_give', entry('give'))
  redis.register_function('throttle_cut', entry('cut'))
  redis.register_function('throttle_sync', entry('sync'))
  redis.register_function('throttle_debit', entry('debit'))
  redis.register_function('throttle_renew', entry('renew'))
  redis.register_function('throttle_release', entry('release'))
  redis.register_function('throttle_resume', entry('resume'))
  redis.register_function('throttle_quota', entry('quota'))
  redis.register_function({
    function_name = 'throttle_peek', callback = entry('peek'), flags = { 'no-writes' },
  })
  redis.register_function({
    function_name = 'throttle_slots', callback = entry('slots'), flags = { 'no-writes' },
  })
  redis.register_function({
    function_name = 'throttle_version',
    callback = function()
      return VERSION
    end,
    flags = { 'no-writes' },
  })
else
  -- The script: the command's name first.
  std()
  local name = ARGV[1] and string.lower(ARGV[1])
  if not (name and COMMANDS[name]) then
    return fail('command')
  end
  table.remove(ARGV, 1)
  if name == 'mtake' then
    return mtake(KEYS, ARGV)
  end
  if #KEYS ~= 1 then
    return fail('one_key', name, name .. ' ' .. USAGE[name])
  end
  return one_key(name)(KEYS, ARGV)
end
