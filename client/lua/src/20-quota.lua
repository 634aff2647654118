-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.QUOTA key capacity rate [CLEAR]: an operator keeps the key's quota at the server,
-- so that every command on the key computes with it whatever its caller sends; CLEAR gives the
-- key back to its callers' quotas. The state instant, the pause, the cut and the slots stay;
-- the key keeps no TTL while a quota is kept. Nothing is written when nothing changes.
local function quota(keys, args, wanted)
  local kept = { q = wanted, capacity = wanted.capacity, text = canonical_rate(args[2]) }
  if #args == 3 then
    if string.upper(args[3]) ~= 'CLEAR' then
      return fail('quota_option')
    end
    kept = nil
  end
  local b, err = open(keys[1])
  if not b then
    return fail(err)
  end
  -- The bucket seen with the quota it keeps from now: the one given either way (after CLEAR,
  -- the caller's own).
  local was = b.kept
  local changed = (was == nil) ~= (kept == nil)
    or (was ~= nil and (was.capacity ~= kept.capacity or was.text ~= kept.text))
  if changed then
    store(keys[1], b.base_s, b.base_n, b.pushback, b.now_s, b.now_n, b.slots, kept)
  end
  return {
    changed and 1 or 0,
    remaining(wanted, b.debt_s, b.debt_n, b.factor),
    ceil_ms(b.debt_s, b.debt_n),
  }
end
