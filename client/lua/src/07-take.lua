-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
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

