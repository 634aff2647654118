-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- Entry points -----------------------------------------------------------------------------

local COMMANDS = {
  take = take, mtake = mtake, pause = pause, give = give, peek = peek, cut = cut, sync = sync,
  debit = debit, renew = renew, release = release, slots = slots, resume = resume,
  quota = quota,
}

-- How many arguments each one-key command takes, as the module counts them: at least, and at
-- most (none for take and release: options follow). Flat tables, not a pair per command: the
-- script builds them on every call: the pairs cost 13 000 instructions a call (callgrind).
local LEAST = {
  take = 2, pause = 3, give = 4, peek = 2, cut = 5, sync = 4, debit = 3, renew = 4, release = 3,
  slots = 2, resume = 2, quota = 2,
}
local MOST = {
  pause = 3, give = 4, peek = 2, cut = 5, sync = 4, debit = 3, renew = 4, slots = 2, resume = 2,
  quota = 3,
}

-- The one-key command `name` (its key count already checked) with the start every one of them
-- shares, in the module's order: the arity, then the quota (capacity, rate). The command is
-- given the quota and checks its own arguments after it.
local function one_key(name)
  local command, least, most = COMMANDS[name], LEAST[name], MOST[name]
  return function(keys, args)
    local count = #args
    if count < least or (most and count > most) then
      return fail('arity', name)
    end
    -- parse_quota's own cache, read here first: a hot key's call makes no function call.
    local by_capacity = QUOTAS[args[2]]
    local quota = by_capacity and by_capacity[args[1]]
    if not quota then
      local err
      quota, err = parse_quota(args[1], args[2])
      if not quota then
        return fail(err)
      end
    end
    return command(keys, args, quota)
  end
end

if redis.register_function then
  -- The library: one function per command, `throttle_<command>`.
  local function entry(name)
    local command = name == 'mtake' and mtake or one_key(name)
    return function(keys, args)
      if not floor then
        std()
      end
      if name ~= 'mtake' and #keys ~= 1 then
        return fail('one_key_function', name, name, USAGE[name])
      end
      return command(keys, args)
    end
  end
  redis.register_function('throttle_take', entry('take'))
  redis.register_function('throttle_mtake', entry('mtake'))
  redis.register_function('throttle_pause', entry('pause'))
  redis.register_function('throttle_give', entry('give'))
  redis.register_function('throttle_cut', entry('cut'))
  redis.register_function('throttle_sync', entry('sync'))
  redis.register_function('throttle_debit', entry('debit'))
  redis.register_function('throttle_renew', entry('renew'))
  redis.register_function('throttle_release', entry('release'))
  redis.register_function('throttle_resume', entry('resume'))
  redis.register_function('throttle_quota', entry('quota'))
  redis.register_function({
    function_name = 'throttle_peek', callback = entry('peek'), flags = { 'no-writes' },
  })
  redis.register_function({
    function_name = 'throttle_slots', callback = entry('slots'), flags = { 'no-writes' },
  })
  redis.register_function({
    function_name = 'throttle_version',
    callback = function()
      return VERSION
    end,
    flags = { 'no-writes' },
  })
else
  -- The script: the command's name first.
  std()
  local name = ARGV[1] and string.lower(ARGV[1])
  if not (name and COMMANDS[name]) then
    return fail('command')
  end
  table.remove(ARGV, 1)
  if name == 'mtake' then
    return mtake(KEYS, ARGV)
  end
  if #KEYS ~= 1 then
    return fail('one_key', name, name .. ' ' .. USAGE[name])
  end
  return one_key(name)(KEYS, ARGV)
end
