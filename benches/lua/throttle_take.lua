-- THROTTLE.TAKE as a Lua script, for servers that cannot load the module (managed Redis),
-- and the baseline the module is benchmarked against.
--
--   EVALSHA <sha> 1 key capacity rate [TOKENS n] [MAXWAIT ms]
--
-- Same semantics, same state and same reply as the module's THROTTLE.TAKE (README, DESIGN.md):
-- the state is the instant (ns since the Unix epoch) at which the bucket is full again, stored as
-- a plain integer with `SET key <state> PXAT <ms>` only when tokens are granted; the reply is
-- {granted, remaining, wait_ms, reset_ms} with durations rounded up; errors carry the module's
-- messages. A key written by either one can be used by the other.
-- benches/tests/lua_matches_module.rs holds it to that, case by case, on real servers.
--
-- The clock is the server's (`TIME`, microseconds), so the script must be replicated by its
-- effects, not by itself: Redis 7+ does that by default, and on 5/6 `replicate_commands`
-- switches it on. Replicas and the AOF get the SET, never the script.
--
-- Lua numbers are doubles, exact only up to 2^53 (ns: 104 days), while instants are ~1.8e18 ns.
-- So instants and durations are pairs (s, n) = s * 1e9 + n ns with 0 <= n < 1e9, and every
-- step is exact: no rounding ever hands out a token early. Common inputs take short paths; the
-- long ones (16+ digit numbers, long decimals, huge buckets) are exact too.

if redis.replicate_commands then
  redis.replicate_commands()
end

local E9 = 1000000000
local floor = math.floor

-- (s, n) pairs: normalised (0 <= n < 1e9), negative iff s < 0.
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

-- a * b as a pair, exactly, for whole a, b <= 1e15 whose product is below 1e18.
local function mul(a, b)
  if a * b < 9e15 then
    local p = a * b -- exact below 2^53
    return floor(p / E9), p % E9
  end
  local ah, al = floor(a / 1e6), a % 1e6
  local bh, bl = floor(b / 1e6), b % 1e6
  local m = ah * bl + al * bh -- < 2e15
  local t = al * bl           -- < 1e12
  local s = ah * bh * 1000 + floor(m / 1000) + floor(t / E9)
  local n = (m % 1000) * 1e6 + t % E9
  if n >= E9 then
    return s + 1, n - E9
  end
  return s, n
end

-- A pair >= 0 in whole ms, rounded up.
local function ceil_ms(s, n)
  return s * 1000 + math.ceil(n / 1e6)
end

-- A whole number written in ASCII digits, 0..=1e15 (MAX_CAPACITY, 16 digits); nil otherwise.
local function uint(text)
  if #text <= 15 then
    if text:find('%D') then
      return nil
    end
    return tonumber(text) -- nil for ''
  end
  local digits = text:match('^0*(%d*)$')
  if not digits or #digits > 16 or (#digits == 16 and digits ~= '1000000000000000') then
    return nil
  end
  return tonumber(digits) or 0
end

-- Arguments, checked in the module's order, with its messages.
if #KEYS ~= 1 then
  return redis.error_reply('ERR the THROTTLE.TAKE script takes exactly one key: EVALSHA sha 1 key capacity rate [TOKENS n] [MAXWAIT ms]')
end
if #ARGV < 2 then
  return redis.error_reply("ERR wrong number of arguments for 'throttle.take' command: THROTTLE.TAKE key capacity rate [TOKENS n] [MAXWAIT ms]")
end
local capacity = uint(ARGV[1])
if not capacity or capacity < 1 then
  return redis.error_reply('ERR capacity must be a whole number of tokens from 1 to 1000000000000000')
end

-- rate = int.frac tokens/s, exactly; leading zeros of int and trailing zeros of frac dropped.
local int, frac = ARGV[2]:match('^0*(%d*)%.?(%d-)0*$')
if not int or #int > 10 or #frac > 18
  or (#int == 10 and (int ~= '1000000000' or frac ~= '')) -- above 1e9
  or (int == '' and (frac == '' or frac:find('^000000')))  -- zero, or below 1e-6
then
  return redis.error_reply('ERR rate must be a decimal number of tokens per second from 0.000001 to 1000000000, like 10 or 0.5')
end
-- One token's refill time in whole ns, rounded up: ceil(10^(9 + #frac) / digits).
local digits = int
if frac ~= '' then
  digits = (int .. frac):match('^0*(%d+)$')
end
local k = 9 + #frac
local interval
if k <= 15 and #digits <= 15 then
  -- Exact: num and den are exact doubles, and a quotient q with q * den <= 1e15 < 2^53 is
  -- never rounded across a whole number (its fraction is at least 1/den, over half its ulp).
  interval = math.ceil(10 ^ k / tonumber(digits))
else
  -- Up to 28 digits: check the double estimate with exact products in base-1e7 limbs.
  local function limbs(text)
    local out, i = {}, #text
    while i > 0 do
      local j = math.max(1, i - 6)
      out[#out + 1] = tonumber(text:sub(j, i))
      i = j - 1
    end
    return out
  end
  local function covers(q, den, num) -- q * den >= num
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
  local num, den = limbs('1' .. string.rep('0', k)), limbs(digits)
  interval = math.max(1, math.ceil(tonumber('1e' .. k) / tonumber(digits)))
  for _ = 1, 4 do
    if interval > 1 and covers(interval - 1, den, num) then
      interval = interval - 1
    elseif not covers(interval, den, num) then
      interval = interval + 1
    else
      break
    end
  end
end

-- capacity * interval <= 10 years. The double product rounds monotonically and the limit is
-- exact, so a product above it is too long for sure; at or below it, check the exact pair.
if capacity * interval > 315360000 * E9 then
  return redis.error_reply('ERR capacity / rate must be at most 315360000 seconds (10 years): raise the rate or lower the capacity')
end
local fill_s, fill_n = mul(capacity, interval)
if lt(315360000, 0, fill_s, fill_n) then
  return redis.error_reply('ERR capacity / rate must be at most 315360000 seconds (10 years): raise the rate or lower the capacity')
end

local tokens_text, wait_text
for i = 3, #ARGV, 2 do
  local name = ARGV[i]:upper()
  if name ~= 'TOKENS' and name ~= 'MAXWAIT' then
    return redis.error_reply('ERR unknown option for THROTTLE.TAKE: the options are TOKENS n and MAXWAIT ms')
  end
  local value = ARGV[i + 1]
  if not value then
    return redis.error_reply('ERR ' .. name .. ' needs a value: ' .. name .. ' n')
  end
  if (name == 'TOKENS' and tokens_text) or (name == 'MAXWAIT' and wait_text) then
    return redis.error_reply('ERR ' .. name .. ' is given more than once')
  end
  if name == 'TOKENS' then
    tokens_text = value
  else
    wait_text = value
  end
end
local tokens = 1
if tokens_text then
  tokens = uint(tokens_text)
  if not tokens or tokens > capacity then
    return redis.error_reply(string.format('ERR TOKENS must be a whole number from 0 to the capacity (%d)', capacity))
  end
end
local max_wait_ms = 0
if wait_text then
  max_wait_ms = uint(wait_text)
  if not max_wait_ms or max_wait_ms > 315360000000 then
    return redis.error_reply('ERR MAXWAIT must be a whole number of milliseconds from 0 to 315360000000 (10 years)')
  end
end

-- The bucket: nothing (full), or the integer THROTTLE.TAKE writes, at most i64::MAX.
local stored = redis.pcall('GET', KEYS[1])
local stored_s, stored_n
if type(stored) == 'table' then
  return redis.error_reply('WRONGTYPE the key holds a value that is not a string, so not a THROTTLE bucket: use another key')
elseif stored then
  if #stored > 19 or stored:find('%D') or stored == '' then
    stored_s = nil
  elseif #stored <= 9 then
    stored_s, stored_n = 0, tonumber(stored)
  else
    stored_s, stored_n = tonumber(stored:sub(1, -10)), tonumber(stored:sub(-9))
    if lt(9223372036, 854775807, stored_s, stored_n) then
      stored_s = nil
    end
  end
  if not stored_s then
    return redis.error_reply('ERR the key holds a string that is not a THROTTLE bucket (expected the integer THROTTLE.TAKE writes); use another key, or DEL this one to start a full bucket')
  end
end

-- The clock, clamped like the module's to the year 2200 (it is never below 0).
local time = redis.call('TIME')
local now_s, now_n = tonumber(time[1]), tonumber(time[2]) * 1000
if now_s >= 7258118400 then
  now_s, now_n = 7258118400, 0
end

-- The take: module/bucket/src/gcra.rs, step for step.
local cost_s, cost_n = mul(tokens, interval)
local base_s, base_n = now_s, now_n
if stored_s and lt(now_s, now_n, stored_s, stored_n) then
  base_s, base_n = stored_s, stored_n
end
local debt_s, debt_n = sub(base_s, base_n, now_s, now_n)
-- The tokens are there once the bucket has refilled to `cost` below full.
local wait_s, wait_n = add(debt_s, debt_n, cost_s, cost_n)
if lt(fill_s, fill_n, wait_s, wait_n) then
  wait_s, wait_n = sub(wait_s, wait_n, fill_s, fill_n)
else
  wait_s, wait_n = 0, 0
end

local written = false
local after_s, after_n = debt_s, debt_n
if tokens > 0 and not lt(floor(max_wait_ms / 1000), (max_wait_ms % 1000) * 1e6, wait_s, wait_n) then
  local tat_s, tat_n = add(base_s, base_n, cost_s, cost_n)
  -- A state past i64::MAX is refused rather than wrapped (unreachable with a sane clock).
  if not lt(9223372036, 854775807, tat_s, tat_n) then
    local state = string.format('%d', tat_n)
    if tat_s > 0 then
      state = string.format('%d%09d', tat_s, tat_n)
    end
    -- A whole number below 2^53 goes out as its digits (%.17g).
    redis.call('SET', KEYS[1], state, 'PXAT', ceil_ms(tat_s, tat_n))
    written = true
    after_s, after_n = add(debt_s, debt_n, cost_s, cost_n)
  end
end

-- Whole tokens left: floor((fill - debt after) / interval), 0 while in debt.
local remaining = 0
local left_s, left_n = sub(fill_s, fill_n, after_s, after_n)
if left_s >= 0 then
  if left_s < 9000000 then
    remaining = floor((left_s * E9 + left_n) / interval) -- exact below 2^53
  else
    -- Estimate, then correct with exact products.
    remaining = floor((left_s * E9 + left_n) / interval)
    local ds, dn = floor(interval / E9), interval % E9
    for _ = 1, 4 do
      local ps, pn = mul(remaining, interval)
      if lt(left_s, left_n, ps, pn) then
        remaining = remaining - 1
      else
        local rs, rn = sub(left_s, left_n, ps, pn)
        if lt(rs, rn, ds, dn) then
          break
        end
        remaining = remaining + 1
      end
    end
  end
end

if tokens == 0 then
  return { 1, remaining, 0, ceil_ms(after_s, after_n) }
end
return { written and 1 or 0, remaining, ceil_ms(wait_s, wait_n), ceil_ms(after_s, after_n) }
