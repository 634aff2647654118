-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
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
