-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.PAUSE key capacity rate ms
local function pause(keys, args, quota)
  local ms = parse_ms(args[3])
  if not ms then
    return fail('pause_ms')
  end
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  local next_ms = paused(keys[1], b.quota, b, b.pushback and b.pushback.cut, ms)
  return next_ms
end

