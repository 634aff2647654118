-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
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
