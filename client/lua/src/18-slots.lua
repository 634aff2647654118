-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.SLOTS key capacity rate: read-only.
local function slots(keys, args)
  if #args ~= 2 then
    return fail('arity', 'slots')
  end
  local quota, err = parse_quota(args[1], args[2])
  if not quota then
    return fail(err)
  end
  local b, read_err = open(keys[1])
  if not b then
    return fail(read_err)
  end
  local held, first_s, first_n = held_at(b.slots, b.now_s, b.now_n)
  if held == 0 then
    return { 0, 0 }
  end
  return { held, ceil_ms(sub2(first_s, first_n, b.now_s, b.now_n)) }
end

