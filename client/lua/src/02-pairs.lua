-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
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

