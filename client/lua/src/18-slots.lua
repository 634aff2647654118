-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.SLOTS key capacity rate: read-only.
local function slots(keys)
  local b, err = open(keys[1])
  if not b then
    return fail(err)
  end
  local held, first_s, first_n = held_at(b.slots, b.now_s, b.now_n)
  if held == 0 then
    return { 0, 0 }
  end
  return { held, ceil_ms(sub2(first_s, first_n, b.now_s, b.now_n)) }
end

