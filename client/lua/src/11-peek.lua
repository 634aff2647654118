-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.PEEK key capacity rate: what TOKENS 0 replies, then the pause and the rate's
-- factor; never a write.
local function peek(keys, _, quota)
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  local paused_ms = 0
  local pushback = b.pushback
  if pushback and lt(b.now_s, b.now_n, pushback.until_s, pushback.until_n) then
    paused_ms = ceil_ms(sub2(pushback.until_s, pushback.until_n, b.now_s, b.now_n))
  end
  return {
    1, remaining(b.quota, b.debt_s, b.debt_n, b.factor), 0, ceil_ms(b.debt_s, b.debt_n),
    paused_ms, b.factor,
  }
end

