-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- The commands, each the module's command of the same name, step by step (take, mtake,
-- pause, give, peek, cut, sync, debit) -----------------------------------------------------
-- A one-key command is called as command(keys, args, quota): its entry (`one_key`, at the end)
-- has checked the key count, the arity and the quota; it checks its own arguments, then reads
-- the key (`open`).

local USAGE = {
  take = 'capacity rate [TOKENS n] [MAXWAIT ms] [TICKET] [FLOOR f] [INFLIGHT n] [LEASE ms]',
  pause = 'capacity rate ms',
  give = 'capacity rate n ticket',
  peek = 'capacity rate',
  cut = 'capacity rate ms factor recovery_ms',
  sync = 'capacity rate remaining reset_ms',
  debit = 'capacity rate n',
  renew = 'capacity rate slot ms',
  release = 'capacity rate slot',
  slots = 'capacity rate',
  resume = 'capacity rate',
  quota = 'capacity rate [CLEAR]',
}

