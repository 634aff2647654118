-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- Entry points -----------------------------------------------------------------------------

local COMMANDS = {
  take = take, mtake = mtake, pause = pause, give = give, peek = peek, cut = cut, sync = sync,
  debit = debit, renew = renew, release = release, slots = slots, resume = resume,
  quota = quota,
}

if redis.register_function then
  -- The library: one function per command, `throttle_<command>`.
  local function entry(name)
    local command = COMMANDS[name]
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
  local command = name and COMMANDS[name]
  if not command then
    return fail('command')
  end
  if name ~= 'mtake' and #KEYS ~= 1 then
    return fail('one_key', name, name .. ' ' .. USAGE[name])
  end
  table.remove(ARGV, 1)
  return command(KEYS, ARGV)
end
