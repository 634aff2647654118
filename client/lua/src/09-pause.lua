-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.PAUSE key capacity rate ms
local function pause(keys, args)
  if #args ~= 3 then
    return fail('arity', 'pause')
  end
  local quota, err = parse_quota(args[1], args[2])
  if not quota then
    return fail(err)
  end
  local ms = whole(args[3], MAX_WAIT_MS)
  if not ms or ms < 1 then
    return fail('pause_ms')
  end
  local b, read_err = open(keys[1])
  if not b then
    return fail(read_err)
  end
  quota = b.kept and b.kept.q or quota -- a quota kept at the server wins
  local next_ms = paused(keys[1], quota, b, b.pushback and b.pushback.cut, ms)
  return next_ms
end

