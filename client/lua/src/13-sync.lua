-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.SYNC key capacity rate remaining reset_ms
local function sync(keys, args, quota)
  local left = whole(args[3], MAX_CAPACITY)
  if not left then
    return fail('remaining')
  end
  local reset = whole(args[4], MAX_WAIT_MS)
  if not reset then
    return fail('reset_ms')
  end
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  local tat_s, tat_n = b.base_s, b.base_n
  if remaining(b.quota, b.debt_s, b.debt_n, b.factor) > left then
    -- The debt that leaves exactly `left` whole tokens.
    local short_s, short_n = sub2(b.quota.fill_s, b.quota.fill_n, cost(b.quota, left, b.factor))
    tat_s, tat_n = max(tat_s, tat_n, add(b.now_s, b.now_n, short_s, short_n))
  end
  local lowered = lt(b.base_s, b.base_n, tat_s, tat_n)
  local wrote = false
  if left == 0 and reset > 0 then
    -- Paused from the lowered state.
    local was_s, was_n = b.base_s, b.base_n
    b.base_s, b.base_n = tat_s, tat_n
    local _, paused_wrote, paused_s, paused_n =
      paused(keys[1], b.quota, b, b.pushback and b.pushback.cut, reset)
    b.base_s, b.base_n = was_s, was_n
    wrote = paused_wrote
    if wrote then
      tat_s, tat_n = paused_s, paused_n
    end
  end
  if not wrote and lowered then
    store(keys[1], tat_s, tat_n, b.pushback, b.now_s, b.now_n, b.slots, b.kept)
    wrote = true
  end
  local debt_s, debt_n = b.debt_s, b.debt_n
  if wrote then
    debt_s, debt_n = sub2(tat_s, tat_n, b.now_s, b.now_n)
  end
  return { wrote and 1 or 0, remaining(b.quota, debt_s, debt_n, b.factor), ceil_ms(debt_s, debt_n) }
end

