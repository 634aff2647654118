-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.DEBIT key capacity rate n
local function debit(keys, args, quota)
  local n = whole(args[3], MAX_CAPACITY)
  if not n then
    return fail('debit_tokens')
  end
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  if n == 0 then
    return { remaining(b.quota, b.debt_s, b.debt_n, b.factor), ceil_ms(b.debt_s, b.debt_n) }
  end
  -- A debt past 20 years is refused; a cost past 1e18 ns (or not a pair) is past it for sure.
  local cost_s, cost_n
  if n * b.quota.interval <= 1e18 then
    cost_s, cost_n = cost(b.quota, n, b.factor)
  end
  local debt_s, debt_n
  if cost_s then
    debt_s, debt_n = add(b.debt_s, b.debt_n, cost_s, cost_n)
  end
  if not debt_s or lt(MAX_DEBT_S, 0, debt_s, debt_n) then
    return fail('too_deep')
  end
  local tat_s, tat_n = add(b.base_s, b.base_n, cost_s, cost_n)
  store(keys[1], tat_s, tat_n, b.pushback, b.now_s, b.now_n, b.slots, b.kept)
  return { remaining(b.quota, debt_s, debt_n, b.factor), ceil_ms(debt_s, debt_n) }
end

