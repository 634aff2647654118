-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.CUT key capacity rate ms factor recovery_ms
local function cut(keys, args, quota)
  local ms = parse_ms(args[3])
  if not ms then
    return fail('pause_ms')
  end
  local factor = parse_factor(args[4])
  if not factor then
    return fail('factor')
  end
  local recovery = parse_ms(args[5])
  if not recovery then
    return fail('recovery')
  end
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  local pushback = b.pushback
  local stored_cut = pushback and pushback.cut
  -- A cut while the bucket is paused is the same episode: the rate is cut once.
  local same_episode = pushback and lt(b.now_s, b.now_n, pushback.until_s, pushback.until_n)
  local new_cut = stored_cut
  if not same_episode then
    local cut_factor = floor(b.factor * factor / FULL)
    if cut_factor < MIN_FACTOR then
      cut_factor = MIN_FACTOR
    end
    -- A later cut never loosens an earlier one: its factor is the lower, and it recovers no
    -- sooner than the earlier one would have.
    local recovery_new = recovery
    if stored_cut then
      local rs, rn = recovered_at(stored_cut)
      rs, rn = sub2(rs, rn, b.now_s, b.now_n)
      if rs >= 0 and ceil_ms(rs, rn) > recovery_new then
        recovery_new = ceil_ms(rs, rn)
      end
      if recovery_new > MAX_WAIT_MS then
        recovery_new = MAX_WAIT_MS
      end
    end
    new_cut = { s = b.now_s, n = b.now_n, factor = cut_factor, recovery = recovery_new }
  end
  local next_ms, wrote = paused(keys[1], b.quota, b, new_cut, ms)
  local effective = stored_cut
  if wrote then
    effective = new_cut
  end
  local factor_now, recovered_ms = FULL, 0
  if effective then
    factor_now = factor_at(effective, b.now_s, b.now_n)
    local until_s, until_n = recovered_at(effective)
    local rs, rn = sub2(until_s, until_n, b.now_s, b.now_n)
    if rs >= 0 then
      recovered_ms = ceil_ms(rs, rn)
    end
  end
  return { (wrote and not same_episode) and 1 or 0, next_ms, factor_now, recovered_ms }
end

