-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.MTAKE numkeys key [key ...] capacity rate tokens [...] [MAXWAIT ms] [FLOOR f ...]
-- [TICKET] [INFLIGHT n LEASE ms]. A denial ends with what held it back, as take's.
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
  local wait_text, floors_at, ticket = nil, nil, false
  local inflight_text, lease_text
  local i = 3 * count + 1
  while i <= nargs do
    local name = string.upper(args[i])
    if name == 'TICKET' then
      if ticket then
        return fail('repeated', 'TICKET')
      end
      ticket = true
      i = i + 1
    elseif name == 'MAXWAIT' then
      local value = args[i + 1]
      if not value then
        return fail('missing', 'MAXWAIT', 'MAXWAIT')
      end
      if wait_text then
        return fail('repeated', 'MAXWAIT')
      end
      wait_text = value
      i = i + 2
    elseif name == 'FLOOR' then
      if nargs - i < count then
        return fail('floors', count)
      end
      if floors_at then
        return fail('repeated', 'FLOOR')
      end
      floors_at = i + 1
      i = i + 1 + count
    elseif name == 'INFLIGHT' or name == 'LEASE' then
      local value = args[i + 1]
      if not value then
        return fail('missing', name, name)
      end
      if (name == 'INFLIGHT' and inflight_text) or (name == 'LEASE' and lease_text) then
        return fail('repeated', name)
      end
      if name == 'INFLIGHT' then
        inflight_text = value
      else
        lease_text = value
      end
      i = i + 2
    else
      return fail('mtake_option')
    end
  end
  if (inflight_text == nil) ~= (lease_text == nil) then
    return fail('inflight_lease')
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
  local cap, lease_ms
  if inflight_text then
    cap = whole(inflight_text, MAX_INFLIGHT)
    if not cap or cap < 1 then
      return fail('inflight')
    end
    lease_ms = whole(lease_text, MAX_WAIT_MS)
    if not lease_ms or lease_ms < 1 then
      return fail('lease')
    end
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
  local slot
  if cap then
    -- The slot, in the first key's bucket: granted only with every bucket's tokens, and only
    -- if fewer than `cap` slots are held there now; the module's mtake, step by step (as
    -- take's). The lease runs from now.
    local b = buckets[1]
    local slots = b.slots
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
    slot = 0
    -- Callers in line for a slot (THROTTLE.TAKE ... LINE) go first: MTAKE never overtakes
    -- them, and leaves the hand-off to their own looks.
    if held >= cap or in_line(slots, now_s, now_n) then
      -- Every slot held: nothing taken, the wait until the first lease ends (or the tokens',
      -- if longer), every bucket as it stands.
      if first_s then
        wait_s, wait_n = max(wait_s, wait_n, sub2(first_s, first_n, now_s, now_n))
      end
      granted = false
      reason = reason + 4
    elseif tokens_granted then
      local id = now_s * 1e6 + floor(now_n / 1000)
      if slots and slots.next > id then
        id = slots.next
      end
      if id >= MAX_SLOT_ID then
        -- No id left (a forged table): nothing taken, no wait to give.
        granted, wait_s, wait_n, reason = false, 0, 0, 4
      else
        local end_s, end_n = add(now_s, now_n, ms_pair(lease_ms))
        local table_after = { next = id + 1 } -- (no waiter in line: it would have waited)
        for k = 1, slots and #slots or 0 do
          table_after[k] = slots[k]
        end
        table_after[#table_after + 1] = { id, end_s, end_n }
        b.slots, slot = table_after, id
        if not b.tat_s then
          -- No tokens from the first bucket: its state stays, now holding the slot.
          b.tat_s, b.tat_n = b.base_s, b.base_n
        end
      end
    end
  end
  local reply = { granted and 1 or 0, ceil_ms(wait_s, wait_n) }
  for k = 1, count do
    local b = buckets[k]
    local debt_s, debt_n = b.debt_s, b.debt_n
    if granted and b.tat_s then
      store(keys[k], b.tat_s, b.tat_n, b.pushback, now_s, now_n, b.slots, b.kept)
      debt_s, debt_n = sub2(b.tat_s, b.tat_n, now_s, now_n)
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
  -- With INFLIGHT, last: the slot's id (0: not granted).
  if slot then
    reply[#reply + 1] = slot
  end
  -- On a denial, last: what held it back.
  if not granted then
    reply[#reply + 1] = reason
  end
  return reply
end

