-- Gives a semaphore slot up on one master only while it still holds this
-- lease's value (live, not already released): at once, waking the
-- waiters that may take it, or, for a minimum hold, when keep ms have
-- passed, on the master's own clock.
-- KEYS: the semaphore's parts (see package redis's sem.lua), its slot
--       index. ARGV: value, waiters' channel prefix, keep in ms (0: now).
-- A revoked holder (see revoke.lua) frees its slot here at once, minimum
-- hold or not.
-- Returns 1 when released (or left to end), 2 when released after a
-- revoke, 0 when not ours there.
local S = sem_keys(1)
local value, wake, hold = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ms = ms_of(now_us())
if sem_revoked(S, value, ms) then
  redis.call('ZREM', S.slots, value)
  redis.call('HDEL', S.rec, value)
  sem_wake(S, wake, sem_limit(S) - sem_prune(S, wake, ms))
  return 2
end
local r = sem_live(S, value, ms)
if not r then
  return 0
end
local limit = sem_limit(S)
if hold > 0 then
  -- The mark ends the lease here: it can no longer renew or release.
  redis.call('HSET', S.rec, value, r.since .. ' ' .. r.renewed .. ' 1 ' .. r.info)
  redis.call('ZADD', S.slots, 'XX', int(ms + hold), value)
  sem_keep(S, hold)
  keep(KEYS[6], hold)
  sem_wake(S, wake, limit - redis.call('ZCARD', S.slots) + 1)
  return 1
end
redis.call('ZREM', S.slots, value)
redis.call('HDEL', S.rec, value)
sem_wake(S, wake, limit - sem_prune(S, wake, ms))
return 1
