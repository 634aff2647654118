-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.RENEW key capacity rate slot ms
local function renew(keys, args)
  local id = parse_slot(args[3])
  if not id then
    return fail('slot_id')
  end
  local ms = parse_ms(args[4])
  if not ms then
    return fail('lease')
  end
  local b, err = open(keys[1])
  if not b then
    return fail(err)
  end
  local end_s, end_n = add(b.now_s, b.now_n, ms_pair(ms))
  local slots = with_slot(b, id, function(one)
    return { one[1], end_s, end_n }
  end)
  if not slots then
    return 0
  end
  store(keys[1], b.base_s, b.base_n, b.pushback, b.now_s, b.now_n, slots, b.kept)
  return 1
end

