-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.RESUME key capacity rate: an operator ends the pause and the cut now, keeping the
-- state as it is (the stored bytes cannot tell a pause's share from real takes, so no earlier
-- instant is safe) and every slot held; nothing written when neither is in effect.
local function resume(keys)
  local b, err = open(keys[1])
  if not b then
    return fail(err)
  end
  local pushback = b.pushback
  if not pushback then
    return 0
  end
  local paused = lt(b.now_s, b.now_n, pushback.until_s, pushback.until_n)
  local cut = pushback.cut and lt(b.now_s, b.now_n, recovered_at(pushback.cut))
  if not paused and not cut then
    return 0
  end
  store(keys[1], b.base_s, b.base_n, nil, b.now_s, b.now_n, b.slots, b.kept)
  return 1
end

