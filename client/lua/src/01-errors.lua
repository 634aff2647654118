-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- Error replies: the module's, for its arguments, its stored state and its keys ------------

-- The texts, the module's byte for byte, built on the first error (the script builds them
-- only for a call that fails).
local TEXTS

local function fail(code, ...)
  if not TEXTS then
    TEXTS = {
      arity = "ERR wrong number of arguments for 'throttle.%s' command",
      capacity = 'ERR capacity must be a whole number of tokens from 1 to 1000000000000000',
      rate = 'ERR rate must be a decimal number of tokens per second from 0.000001 to '
        .. '1000000000, like 10 or 0.5',
      fill = 'ERR capacity / rate must be at most 315360000 seconds (10 years): raise the '
        .. 'rate or lower the capacity',
      tokens = 'ERR TOKENS must be a whole number from 0 to the capacity (%d)',
      max_wait = 'ERR MAXWAIT must be a whole number of milliseconds from 0 to 315360000000 '
        .. '(10 years)',
      take_option = 'ERR unknown option for THROTTLE.TAKE: the options are TOKENS n, MAXWAIT '
        .. 'ms, TICKET, FLOOR f, INFLIGHT n, LEASE ms, LINE place_ms and WAITER id',
      mtake_option = 'ERR unknown option for THROTTLE.MTAKE: the options are MAXWAIT ms, '
        .. 'FLOOR f [f ...] (one floor per key), TICKET, INFLIGHT n, LEASE ms, LINE place_ms and '
        .. 'WAITER id',
      release_option = 'ERR unknown option for THROTTLE.RELEASE: the option is INFLIGHT n, the '
        .. 'cap the slot was taken under',
      quota_option = "ERR unknown option for THROTTLE.QUOTA: the option is CLEAR, which gives "
        .. "the key back to its callers' quotas",
      missing = 'ERR %s needs a value: %s n',
      repeated = 'ERR %s is given more than once',
      pause_ms = 'ERR ms must be a whole number of milliseconds from 1 to 315360000000 '
        .. "(10 years): the supplier's Retry-After",
      give_tokens = 'ERR n must be a whole number of tokens from 0 to the capacity (%d)',
      ticket = 'ERR ticket must be a ticket from a THROTTLE.TAKE or MTAKE ... TICKET reply for '
        .. 'this key (a whole number of microseconds)',
      numkeys = 'ERR numkeys must be a whole number from 1 to 16',
      triples = 'ERR THROTTLE.MTAKE needs capacity, rate and tokens for each of its %d keys, '
        .. 'in key order, then the options (MAXWAIT ms, FLOOR f [f ...], TICKET, INFLIGHT n, '
        .. 'LEASE ms, LINE place_ms, WAITER id)',
      duplicate = 'ERR the keys of THROTTLE.MTAKE must be distinct: name each bucket once',
      floor = 'ERR FLOOR must be a whole number of tokens below the capacity (%d) that '
        .. "leaves room for the call's TOKENS",
      floors = 'ERR FLOOR needs one floor per key, in key order: %d values',
      factor = 'ERR factor must be a decimal from 0.01 to 1, like 0.7: the rate is multiplied '
        .. 'by it',
      recovery = 'ERR recovery_ms must be a whole number of milliseconds from 1 to '
        .. '315360000000 (10 years): how long the rate takes to climb back',
      remaining = 'ERR remaining must be a whole number of tokens from 0 to 1000000000000000: '
        .. 'what the supplier says is left',
      reset_ms = 'ERR reset_ms must be a whole number of milliseconds from 0 to 315360000000 '
        .. "(10 years): when the supplier's quota resets",
      debit_tokens = 'ERR n must be a whole number of tokens from 0 to 1000000000000000',
      too_deep = 'ERR THROTTLE.DEBIT would put the bucket more than 20 years in debt: debit '
        .. 'fewer tokens, or DEL the key to start a full bucket',
      wrongtype = 'WRONGTYPE the key holds a value that is not a string, so not a THROTTLE '
        .. 'bucket: use another key',
      not_bucket = 'ERR the key holds a string that is not a THROTTLE bucket (expected the 8- '
        .. 'or 32-byte state THROTTLE.TAKE writes, or one with calls in flight); use another '
        .. 'key, or DEL this one to start a full bucket',
      inflight = 'ERR INFLIGHT must be a whole number of calls from 1 to 1024: how many may be '
        .. 'in flight at once',
      lease = 'ERR the lease must be a whole number of milliseconds from 1 to 315360000000 '
        .. '(10 years): longer than a round trip plus the renewal period',
      inflight_lease = 'ERR INFLIGHT and LEASE go together: INFLIGHT n LEASE ms takes a slot '
        .. 'for a call in flight, held for ms unless renewed',
      line_inflight = 'ERR LINE needs INFLIGHT n LEASE ms: the line is for a slot under that '
        .. 'cap',
      waiter_line = 'ERR WAITER needs LINE place_ms: WAITER id looks again at a place in the '
        .. 'line',
      line_floor = 'ERR LINE does not go with FLOOR: a floored call waits for its tokens and '
        .. 'takes again, without a place in line',
      place_ms = "ERR LINE's place_ms must be a whole number of milliseconds from 1 to "
        .. '315360000000 (10 years): how long a waiter keeps its place without looking again',
      line_full = 'ERR the line for a slot is full (1024 waiters): wait a lease and take again',
      slot_id = 'ERR slot must be a slot id from a THROTTLE.TAKE ... INFLIGHT reply (a whole '
        .. 'number from 0 to 9007199254740992)',
      -- The script's and the library's own rules: which command, and one key for the one-key
      -- commands.
      command = 'ERR unknown THROTTLE script command: the first argument must be take, mtake, '
        .. 'pause, give, peek, cut, sync, debit, renew, release, slots, resume or quota',
      one_key = "ERR the THROTTLE script's %s takes exactly one key: EVALSHA sha 1 key %s",
      one_key_function = 'ERR throttle_%s takes exactly one key: FCALL throttle_%s 1 key %s',
    }
  end
  return redis.error_reply(string.format(TEXTS[code], ...))
end

