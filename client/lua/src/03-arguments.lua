-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
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
