-- The THROTTLE commands as one Lua script, for servers that cannot load the module (managed
-- Redis and Valkey services refuse MODULE LOAD), and the baseline the module is benchmarked
-- against. The first argument names the command (case-insensitive):
--
--   EVALSHA sha 1 key take capacity rate [TOKENS n] [MAXWAIT ms] [TICKET]
--       -> {granted, remaining, wait_ms, reset_ms[, ticket]}
--   EVALSHA sha N key1 .. keyN mtake capacity rate tokens [capacity rate tokens ...] [MAXWAIT ms]
--       -> {granted, wait_ms, remaining_1, reset_ms_1, ...}
--   EVALSHA sha 1 key pause capacity rate ms          -> ms until the next token
--   EVALSHA sha 1 key give capacity rate n ticket     -> tokens given back
--   EVALSHA_RO sha 1 key peek capacity rate           -> {1, remaining, 0, reset_ms}
--
-- Each is THROTTLE.<COMMAND> with the keys moved in front: the same semantics, the same
-- stored state, the same replies and the same error messages, byte for byte (README,
-- DESIGN.md; the arithmetic is module/bucket/src, followed step by step below). The state is
-- the instant (ns since the Unix epoch) at which the bucket is full again, as 8 bytes (the
-- i64, little-endian), written with `SET key <state> PXAT <ms>` only when something changes,
-- so a key written by the module can be used by the script and back. tests/tests/script_matches_module.rs holds
-- the two to that, case by case, on every supported server. `peek` never writes: it runs
-- under EVALSHA_RO, on a read-only replica and during CLIENT PAUSE WRITE.
--
-- The clock is the server's (`TIME`, microseconds), so the script must be replicated by its
-- effects, not by itself: Redis 7+ and Valkey do that by default (on 5 and 6,
-- `redis.replicate_commands()` switches it on). Replicas and the AOF get the SET, never the
-- script.
--
-- Lua numbers are doubles, exact only up to 2^53 (in ns: 104 days), while instants are
-- ~1.8e18 ns. So instants and durations are pairs (s, n) = s * 1e9 + n ns with 0 <= n < 1e9,
-- and every step is exact: no rounding ever hands out a token early. Common inputs take short
-- paths; the long ones (16+ digit numbers, long decimals, huge buckets) are exact too.
--
-- Layout: limits and error texts, pair arithmetic, argument parsing, the bucket (read, clock,
-- write, the GCRA view), one function per command, and the dispatch at the end.

if redis.replicate_commands then
  redis.replicate_commands()
end

local floor = math.floor

-- Limits (module/bucket/src/limits.rs) -----------------------------------------------------

local E9 = 1000000000
local MAX_CAPACITY = 1000000000000000
local MAX_WAIT_MS = 315360000000       -- 10 years: MAXWAIT and a pause
local MAX_FILL_S = 315360000           -- 10 years, the longest capacity / rate
local MAX_KEYS = 16
local MAX_TICKET = '9223372036854775'  -- i64::MAX ns in µs, 16 digits
local MAX_NOW_S = 7258118400           -- clock readings are clamped to the year 2200
local I64_S, I64_N = 9223372036, 854775807 -- i64::MAX ns: no state goes past it
local EARLIEST_S = 1577836800          -- 2020-01-01: no command writes a state before it
local LATEST_AHEAD_S = 662256000       -- 21 years: nor one further after the clock
local FRACTION_DIGITS = 24             -- rate digits after the point that count

-- Error replies (module/bucket/src/error.rs and state.rs, module/src/bucket_key.rs) ---------

-- The error reply for `code`, its text formatted with the details. The texts are the module's,
-- byte for byte. The table is built only when a call fails: the whole chunk runs again at
-- every call, so whatever it sets up at the top level costs every call.
local function fail(code, ...)
  local texts = {
    arity = "ERR wrong number of arguments for 'throttle.%s' command",
    capacity = 'ERR capacity must be a whole number of tokens from 1 to 1000000000000000',
    rate = 'ERR rate must be a decimal number of tokens per second from 0.000001 to '
      .. '1000000000, like 10 or 0.5',
    fill = 'ERR capacity / rate must be at most 315360000 seconds (10 years): raise the rate '
      .. 'or lower the capacity',
    tokens = 'ERR TOKENS must be a whole number from 0 to the capacity (%d)',
    max_wait = 'ERR MAXWAIT must be a whole number of milliseconds from 0 to 315360000000 '
      .. '(10 years)',
    take_option = 'ERR unknown option for THROTTLE.TAKE: the options are TOKENS n, MAXWAIT ms '
      .. 'and TICKET',
    mtake_option = 'ERR unknown option for THROTTLE.MTAKE: the only option is MAXWAIT ms',
    missing = 'ERR %s needs a value: %s n',
    repeated = 'ERR %s is given more than once',
    pause_ms = 'ERR ms must be a whole number of milliseconds from 1 to 315360000000 '
      .. "(10 years): the supplier's Retry-After",
    give_tokens = 'ERR n must be a whole number of tokens from 0 to the capacity (%d)',
    ticket = 'ERR ticket must be the fifth element of a THROTTLE.TAKE ... TICKET reply (a '
      .. 'whole number of microseconds)',
    numkeys = 'ERR numkeys must be a whole number from 1 to 16',
    triples = 'ERR THROTTLE.MTAKE needs capacity, rate and tokens for each of its %d keys, in '
      .. 'key order, then optionally MAXWAIT ms',
    duplicate = 'ERR the keys of THROTTLE.MTAKE must be distinct: name each bucket once',
    wrongtype = 'WRONGTYPE the key holds a value that is not a string, so not a THROTTLE '
      .. 'bucket: use another key',
    not_bucket = 'ERR the key holds a string that is not a THROTTLE bucket (expected the '
      .. '8-byte state THROTTLE.TAKE writes); use another key, or DEL this one to start a '
      .. 'full bucket',
    -- The script's own rules: which command, and one key for the one-key commands.
    command = 'ERR unknown THROTTLE script command: the first argument must be take, mtake, '
      .. 'pause, give or peek',
    one_key = "ERR the THROTTLE script's %s takes exactly one key: EVALSHA sha 1 key %s",
  }
  return redis.error_reply(string.format(texts[code], ...))
end

-- (s, n) pairs: s * 1e9 + n ns, normalised (0 <= n < 1e9), negative iff s < 0 -------------

local function add(as, an, bs, bn)
  local s, n = as + bs, an + bn
  if n >= E9 then
    return s + 1, n - E9
  end
  return s, n
end

local function sub(as, an, bs, bn)
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
      local rs, rn = sub(s, n, ps, pn)
      local r = rs * E9 + rn
      if r < d then
        return q, r
      end
      q = q + 1
    end
  end
  error('divmod did not converge') -- unreachable: the estimate is within a few units
end

-- ceil(x / d), as divmod.
local function div_ceil(s, n, d)
  local q, r = divmod(s, n, d)
  if r > 0 then
    return q + 1
  end
  return q
end

-- A pair >= 0 in whole ms, rounded up (gcra.rs `ceil_ms`).
local function ceil_ms(s, n)
  return s * 1000 + math.ceil(n / 1e6)
end

-- A whole number of ms as a pair.
local function ms_pair(ms)
  return floor(ms / 1000), (ms % 1000) * 1e6
end

-- Arguments (module/bucket/src/args.rs, interval.rs), checked in the module's order --------

-- Every parse below is linear in its input: a pattern that can backtrack (`^0*(%d*)$`) costs
-- N^2 or worse on a long argument, inside one string call where the script's time limit is
-- never checked. Only single-class finds (each position tried once) and plain finds are used.

-- The position of the first byte that is not a '0' (nil: all zeros, or empty).
local function first_nonzero(text)
  return text:find('[^0]')
end

-- A whole number in ASCII digits (no sign, no spaces), 0..=max (max <= 1e15); nil otherwise.
local function whole(text, max_value)
  if text == '' or text:find('%D') then
    return nil
  end
  local value
  if #text <= 15 then -- the common case: below 2^53, so tonumber is exact
    value = tonumber(text)
  else
    local first = first_nonzero(text)
    if not first then
      return 0
    end
    if #text - first >= 16 then -- 17 digits or more: above any max
      return nil
    end
    value = tonumber(text:sub(first)) -- exact up to 2^53, and any 16 digits above are > max
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
    local j = math.max(1, i - 6)
    out[#out + 1] = tonumber(text:sub(j, i))
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
  for i = math.max(#product, #num), 1, -1 do
    local x, y = product[i] or 0, num[i] or 0
    if x ~= y then
      return x > y
    end
  end
  return true
end

-- One token's refill time in whole ns, rounded up: ceil(1e9 / rate). The rate is a plain
-- decimal from 0.000001 to 1000000000 with any number of digits after the point; digits
-- past the 24th are dropped (a longer interval: fewer tokens), but the upper limit is
-- checked on all of them. nil for anything else.
local function parse_interval(text)
  -- Digits, a point, digits: leading zeros and trailing fraction zeros left out.
  local int, frac = text, ''
  local point = text:find('.', 1, true)
  if point then
    int, frac = text:sub(1, point - 1), text:sub(point + 1)
  end
  if (int == '' and frac == '') or int:find('%D') or frac:find('%D') then
    return nil
  end
  local first = first_nonzero(int)
  if not first then
    int = ''
  elseif first > 1 then
    int = int:sub(first)
  end
  if #int > 10 then
    return nil
  end
  -- Above 1e9, however little: checked on every digit, before any are dropped.
  if #int == 10 and (frac:find('[^0]') or int > '1000000000') then
    return nil
  end
  if #frac > FRACTION_DIGITS then
    frac = frac:sub(1, FRACTION_DIGITS) -- the same value as trimming the zeros first
  end
  local last = #frac
  while last > 0 and frac:byte(last) == 48 do -- at most 24 steps
    last = last - 1
  end
  frac = frac:sub(1, last)
  -- rate = digits / 10^#frac, exactly.
  local digits = int .. frac
  if int == '' then
    digits = frac:match('^0*(%d*)')
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
    return math.ceil(num / tonumber(digits))
  end
  -- Up to 34 digits: the double estimate is within one; fix it with exact products.
  local num, den = limbs('1' .. string.rep('0', k)), limbs(digits)
  local interval = math.max(1, math.ceil(tonumber('1e' .. k) / tonumber(digits)))
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

-- `capacity rate`: capacity, then rate, then that the bucket fills within 10 years. Returns
-- the quota {capacity, interval, fill_s, fill_n}, or nil and the error text.
local function parse_quota(capacity_text, rate_text)
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
  return { capacity = capacity, interval = interval, fill_s = fill_s, fill_n = fill_n }
end

-- TOKENS n (or an MTAKE triple's tokens): 0..=capacity.
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

-- The bucket: its state, the clock, a write, and the GCRA view (module/bucket/src/gcra.rs) -

-- The state at `key` as a pair, seen at `now`; nil for a missing key (a full bucket); or nil,
-- nil and the error text. A state is the i64 THROTTLE.TAKE writes, as 8 bytes, little-endian
-- (at most i64::MAX: the last byte below 128); earlier releases wrote it as 1 to 19 digits. An
-- instant no command writes is not a bucket (module/bucket/src/state.rs): before 2020 while
-- the clock is past it, or more than 21 years after the clock.
local function read_state(key, now_s, now_n)
  local stored = redis.pcall('GET', key)
  if type(stored) == 'table' then
    return nil, nil, 'wrongtype'
  end
  if not stored then
    return nil
  end
  local s, n
  if #stored == 8 then
    if stored:byte(8) >= 128 then
      return nil, nil, 'not_bucket'
    end
    -- (s, n) * 256 + byte, from the last byte down; every step stays below 2^53.
    s, n = 0, 0
    for i = 8, 1, -1 do
      local m = n * 256 + stored:byte(i)
      s, n = s * 256 + floor(m / E9), m % E9
    end
  elseif stored == '' or #stored > 19 or stored:find('%D') then
    return nil, nil, 'not_bucket'
  elseif #stored <= 9 then
    s, n = 0, tonumber(stored)
  else
    s, n = tonumber(stored:sub(1, -10)), tonumber(stored:sub(-9))
  end
  if (s < EARLIEST_S and now_s >= EARLIEST_S) or lt(now_s + LATEST_AHEAD_S, now_n, s, n) then
    return nil, nil, 'not_bucket'
  end
  return s, n
end

-- The server's clock in µs as a pair, clamped to the year 2200 (it is never below 0).
local function clock()
  local time = redis.call('TIME')
  local s = tonumber(time[1])
  if s >= MAX_NOW_S then
    return MAX_NOW_S, 0
  end
  return s, tonumber(time[2]) * 1000
end

-- Whether a state fits an i64: one past it is refused, never wrapped (only a forged state
-- gets there; the limits keep every real one decades inside).
local function fits(s, n)
  return not lt(I64_S, I64_N, s, n)
end

-- SET key <state> PXAT <the same instant rounded up to ms>: a missing key is a full bucket,
-- so the key must not expire any earlier. The state's 8 bytes, lowest first: with
-- s = a * 256 + b, the pair is (a, (b * 1e9 + n) / 256) * 256 + (b * 1e9 + n) % 256, exactly.
local function store(key, s, n)
  local bytes = {}
  local expire = string.format('%d', ceil_ms(s, n))
  for i = 1, 8 do
    local m = (s % 256) * E9 + n
    bytes[i] = m % 256
    s, n = floor(s / 256), floor(m / 256)
  end
  redis.call('SET', key, string.char(unpack(bytes)), 'PXAT', expire)
end

-- The bucket seen at `now`: `base`, when it is full, never before now (time never runs
-- backwards for a bucket), and `debt`, how far ahead of now that is.
local function view(state_s, state_n, now_s, now_n)
  local base_s, base_n = now_s, now_n
  if state_s then
    base_s, base_n = max(now_s, now_n, state_s, state_n)
  end
  local debt_s, debt_n = sub(base_s, base_n, now_s, now_n)
  return base_s, base_n, debt_s, debt_n
end

-- How long until `cost` is there: once the bucket has refilled to `cost` below full.
local function wait_for(quota, debt_s, debt_n, cost_s, cost_n)
  local s, n = add(debt_s, debt_n, cost_s, cost_n)
  s, n = sub(s, n, quota.fill_s, quota.fill_n)
  if s < 0 then
    return 0, 0
  end
  return s, n
end

-- Whole tokens left with `debt` ahead of now: 0 while in debt past the capacity.
local function remaining(quota, debt_s, debt_n)
  local s, n = sub(quota.fill_s, quota.fill_n, debt_s, debt_n)
  if s < 0 then
    return 0
  end
  return (divmod(s, n, quota.interval))
end

-- The ticket of a state: µs, rounded down. Exact: a state is at most 21 years after the clock,
-- itself clamped to the year 2200, so its µs stay below 2^53 (the year 2255).
local function ticket_of(s, n)
  return s * 1e6 + floor(n / 1000)
end

-- The commands (module/bucket/src/take.rs, mtake.rs, pause.rs, give.rs) --------------------

local USAGE = {
  take = 'take capacity rate [TOKENS n] [MAXWAIT ms] [TICKET]',
  pause = 'pause capacity rate ms',
  give = 'give capacity rate n ticket',
  peek = 'peek capacity rate',
}

-- THROTTLE.TAKE key capacity rate [TOKENS n] [MAXWAIT ms] [TICKET]
local function take(keys, argv)
  if #argv < 3 then
    return fail('arity', 'take')
  end
  local quota, err = parse_quota(argv[2], argv[3])
  if not quota then
    return fail(err)
  end
  local tokens_text, wait_text, ticket = nil, nil, false
  local i = 4
  while i <= #argv do
    local name = argv[i]:upper()
    if name == 'TICKET' then
      if ticket then
        return fail('repeated', 'TICKET')
      end
      ticket = true
      i = i + 1
    else
      if name ~= 'TOKENS' and name ~= 'MAXWAIT' then
        return fail('take_option')
      end
      local value = argv[i + 1]
      if not value then
        return fail('missing', name, name)
      end
      if (name == 'TOKENS' and tokens_text) or (name == 'MAXWAIT' and wait_text) then
        return fail('repeated', name)
      end
      if name == 'TOKENS' then
        tokens_text = value
      else
        wait_text = value
      end
      i = i + 2
    end
  end
  local tokens, max_wait_ms = 1, 0
  if tokens_text then
    tokens, err = parse_tokens(tokens_text, quota.capacity)
    if not tokens then
      return fail(err, quota.capacity)
    end
  end
  if wait_text then
    max_wait_ms, err = parse_max_wait(wait_text)
    if not max_wait_ms then
      return fail(err)
    end
  end

  local now_s, now_n = clock()
  local state_s, state_n, read_err = read_state(keys[1], now_s, now_n)
  if read_err then
    return fail(read_err)
  end
  local base_s, base_n, debt_s, debt_n = view(state_s, state_n, now_s, now_n)

  local granted, wait_s, wait_n, taken = 1, 0, 0, 0
  local after_s, after_n = debt_s, debt_n
  if tokens > 0 then
    local cost_s, cost_n = mul(tokens, quota.interval)
    wait_s, wait_n = wait_for(quota, debt_s, debt_n, cost_s, cost_n)
    granted = 0
    local limit_s, limit_n = ms_pair(max_wait_ms)
    if not lt(limit_s, limit_n, wait_s, wait_n) then
      local tat_s, tat_n = add(base_s, base_n, cost_s, cost_n)
      if fits(tat_s, tat_n) then
        store(keys[1], tat_s, tat_n)
        granted = 1
        taken = ticket_of(tat_s, tat_n)
        after_s, after_n = add(debt_s, debt_n, cost_s, cost_n)
      end
    end
  end
  local reply = {
    granted,
    remaining(quota, after_s, after_n),
    ceil_ms(wait_s, wait_n),
    ceil_ms(after_s, after_n),
  }
  if ticket then
    reply[5] = taken
  end
  return reply
end

-- THROTTLE.MTAKE numkeys key [key ...] capacity rate tokens [...] [MAXWAIT ms]
local function mtake(keys, argv)
  -- The server's arity check first: the module's call has numkeys, the keys and what follows.
  if 2 + #keys + #argv - 1 < 6 then
    return fail('arity', 'mtake')
  end
  local count = #keys
  if count < 1 or count > MAX_KEYS then
    return fail('numkeys')
  end
  if #argv - 1 < 3 * count then
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
    local at = 3 * i - 1
    local quota, err = parse_quota(argv[at], argv[at + 1])
    if not quota then
      return fail(err)
    end
    local n
    n, err = parse_tokens(argv[at + 2], quota.capacity)
    if not n then
      return fail(err, quota.capacity)
    end
    quotas[i], tokens[i] = quota, n
  end
  local wait_text
  local i = 3 * count + 2
  while i <= #argv do
    if argv[i]:upper() ~= 'MAXWAIT' then
      return fail('mtake_option')
    end
    local value = argv[i + 1]
    if not value then
      return fail('missing', 'MAXWAIT', 'MAXWAIT')
    end
    if wait_text then
      return fail('repeated', 'MAXWAIT')
    end
    wait_text = value
    i = i + 2
  end
  local max_wait_ms = 0
  if wait_text then
    local err
    max_wait_ms, err = parse_max_wait(wait_text)
    if not max_wait_ms then
      return fail(err)
    end
  end

  -- Every bucket is read (and its type checked) before anything is written.
  local now_s, now_n = clock()
  local states = {}
  for k = 1, count do
    local s, n, err = read_state(keys[k], now_s, now_n)
    if err then
      return fail(err)
    end
    states[k] = { s, n }
  end

  -- The wait is the longest of the buckets' own waits.
  local buckets, wait_s, wait_n, takes_any = {}, 0, 0, false
  for k = 1, count do
    local b = {}
    b.base_s, b.base_n, b.debt_s, b.debt_n = view(states[k][1], states[k][2], now_s, now_n)
    b.cost_s, b.cost_n = mul(tokens[k], quotas[k].interval)
    -- A bucket asked for nothing is only inspected: its debt delays no one.
    if tokens[k] > 0 then
      wait_s, wait_n = max(wait_s, wait_n,
        wait_for(quotas[k], b.debt_s, b.debt_n, b.cost_s, b.cost_n))
      takes_any = true
    end
    buckets[k] = b
  end
  local limit_s, limit_n = ms_pair(max_wait_ms)
  local granted = takes_any and not lt(limit_s, limit_n, wait_s, wait_n)

  -- All the tokens are used at one instant, after the longest wait, so each bucket takes
  -- them as of then: max(base, now + wait) + cost. A state past i64 refuses the whole call.
  if granted then
    local act_s, act_n = add(now_s, now_n, wait_s, wait_n)
    for k = 1, count do
      local b = buckets[k]
      if tokens[k] > 0 then
        local s, n = max(b.base_s, b.base_n, act_s, act_n)
        b.tat_s, b.tat_n = add(s, n, b.cost_s, b.cost_n)
        granted = granted and fits(b.tat_s, b.tat_n)
      end
    end
  end
  local reply = { (granted or not takes_any) and 1 or 0, 0 }
  if takes_any then
    reply[2] = ceil_ms(wait_s, wait_n)
  end
  for k = 1, count do
    local b = buckets[k]
    local debt_s, debt_n = b.debt_s, b.debt_n
    if granted and b.tat_s then
      store(keys[k], b.tat_s, b.tat_n)
      debt_s, debt_n = sub(b.tat_s, b.tat_n, now_s, now_n)
    end
    reply[2 * k + 1] = remaining(quotas[k], debt_s, debt_n)
    reply[2 * k + 2] = ceil_ms(debt_s, debt_n)
  end
  return reply
end

-- THROTTLE.PAUSE key capacity rate ms
local function pause(keys, argv)
  if #argv ~= 4 then
    return fail('arity', 'pause')
  end
  local quota, err = parse_quota(argv[2], argv[3])
  if not quota then
    return fail(err)
  end
  local ms = whole(argv[4], MAX_WAIT_MS)
  if not ms or ms < 1 then
    return fail('pause_ms')
  end
  local now_s, now_n = clock()
  local state_s, state_n, read_err = read_state(keys[1], now_s, now_n)
  if read_err then
    return fail(read_err)
  end
  local base_s, base_n = view(state_s, state_n, now_s, now_n)

  -- The first token is there `ms` from now, then refill goes on from that one token:
  -- state = max(state, now + ms + (capacity - 1) * interval).
  local short_s, short_n = mul(quota.capacity - 1, quota.interval)
  local ms_s, ms_n = ms_pair(ms)
  local target_s, target_n = add(now_s, now_n, ms_s, ms_n)
  target_s, target_n = add(target_s, target_n, short_s, short_n)
  local tat_s, tat_n = base_s, base_n
  if lt(base_s, base_n, target_s, target_n) and fits(target_s, target_n) then
    store(keys[1], target_s, target_n)
    tat_s, tat_n = target_s, target_n
  end
  local next_s, next_n = sub(tat_s, tat_n, short_s, short_n)
  return ceil_ms(sub(next_s, next_n, now_s, now_n))
end

-- THROTTLE.GIVE key capacity rate n ticket: gives a take's tokens back while nothing was taken
-- after it, never beyond a full bucket (module/bucket/src/give.rs).
local function give(keys, argv)
  if #argv ~= 5 then
    return fail('arity', 'give')
  end
  local quota, err = parse_quota(argv[2], argv[3])
  if not quota then
    return fail(err)
  end
  local n = whole(argv[4], quota.capacity)
  if not n then
    return fail('give_tokens', quota.capacity)
  end
  -- The ticket is kept as text: it may pass 2^53 (MAX_TICKET has 16 digits).
  local ticket = argv[5]
  if ticket == '' or ticket:find('%D') then
    return fail('ticket')
  end
  local first = first_nonzero(ticket)
  ticket = first and ticket:sub(first) or ''
  if #ticket > #MAX_TICKET or (#ticket == #MAX_TICKET and ticket > MAX_TICKET) then
    return fail('ticket')
  end
  -- ticket µs * 1000 as a pair.
  local ticket_s = tonumber(ticket:sub(1, -7)) or 0
  local ticket_n = (tonumber(ticket:sub(-6)) or 0) * 1000

  local now_s, now_n = clock()
  local state_s, state_n, read_err = read_state(keys[1], now_s, now_n)
  if read_err then
    return fail(read_err)
  end
  if not state_s then
    return 0 -- a missing key is a full bucket: nothing to give back to
  end
  local base_s, base_n, debt_s, debt_n = view(state_s, state_n, now_s, now_n)
  -- Only while the state is still this take's slot end (module/bucket/src/give.rs says why):
  -- within the ticket's rounding (999 ns) when a token takes longer than that, exactly on it
  -- otherwise. Before it: reset since, or given back already.
  local since_s, since_n = sub(state_s, state_n, ticket_s, ticket_n)
  local rounding = 0
  if quota.interval > 999 then
    rounding = 999
  end
  if since_s ~= 0 or since_n > rounding or (debt_s == 0 and debt_n == 0) or n == 0 then
    return 0
  end
  -- Never beyond a full bucket: the room below full, rounded up.
  local given = math.min(n, div_ceil(debt_s, debt_n, quota.interval))
  local back_s, back_n = mul(n, quota.interval)
  local tat_s, tat_n = sub(base_s, base_n, back_s, back_n)
  if lt(now_s, now_n, tat_s, tat_n) then
    store(keys[1], tat_s, tat_n)
  else
    redis.call('DEL', keys[1]) -- full again: a missing key is a full bucket
  end
  return given
end

-- THROTTLE.PEEK key capacity rate: what TOKENS 0 replies, and never a write.
local function peek(keys, argv)
  if #argv ~= 3 then
    return fail('arity', 'peek')
  end
  local quota, err = parse_quota(argv[2], argv[3])
  if not quota then
    return fail(err)
  end
  local now_s, now_n = clock()
  local state_s, state_n, read_err = read_state(keys[1], now_s, now_n)
  if read_err then
    return fail(read_err)
  end
  local _, _, debt_s, debt_n = view(state_s, state_n, now_s, now_n)
  return { 1, remaining(quota, debt_s, debt_n), 0, ceil_ms(debt_s, debt_n) }
end

-- Dispatch ---------------------------------------------------------------------------------

local COMMANDS = { take = take, mtake = mtake, pause = pause, give = give, peek = peek }

local name = ARGV[1] and ARGV[1]:lower()
local command = name and COMMANDS[name]
if not command then
  return fail('command')
end
if name ~= 'mtake' and #KEYS ~= 1 then
  return fail('one_key', name, USAGE[name])
end
return command(KEYS, ARGV)
