-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
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

