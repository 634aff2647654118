-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
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

