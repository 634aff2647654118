-- The token bucket people write by hand today: tokens and a timestamp in a hash, refilled by
-- the elapsed time, written back with HSET and PEXPIRE. Floating point, milliseconds, no
-- reservations: the baseline the Lua twin's speed is measured against, not a reference for
-- its semantics.
--
-- EVALSHA sha 1 key capacity rate [tokens] -> {allowed, tokens left, ms to wait}
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local requested = tonumber(ARGV[3] or '1')
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
local elapsed = math.max(0, now - ts)
tokens = math.min(capacity, tokens + elapsed * rate / 1000)
local allowed = 0
local wait = 0
if tokens >= requested then
  tokens = tokens - requested
  allowed = 1
else
  wait = math.ceil((requested - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / rate * 1000))
return { allowed, math.floor(tokens), wait }
