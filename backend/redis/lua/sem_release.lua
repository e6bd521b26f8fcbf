-- Gives a semaphore slot up only while it still holds this lease's value
-- (live, not already released), and wakes the waiters that may take it.
-- With a minimum hold that has not ended, the slot stays this lease's
-- until the grant plus the minimum (the record's server time), and the
-- woken waiters come back by then. A revoked holder (see revoke.lua)
-- frees its slot at once, minimum hold or not.
-- KEYS: the semaphore's parts (see sem.lua).
-- ARGV: value, waiters' channel prefix, minimum hold in ms (0: none).
-- Returns 1 when released (or left to end), 2 when released after a
-- revoke, 0 when the slot was no longer ours.
local S = sem_keys(1)
local value, wake, hold = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_us()
local ms = ms_of(now)
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
  local left = math.ceil((tonumber(r.since) + hold * 1000 - now) / 1000)
  if left > 0 then
    -- The mark ends the lease: it can no longer renew or release again.
    redis.call('HSET', S.rec, value, r.since .. ' ' .. r.renewed .. ' 1 ' .. r.info)
    redis.call('ZADD', S.slots, 'XX', int(ms + left), value)
    sem_keep(S, left)
    sem_wake(S, wake, limit - redis.call('ZCARD', S.slots) + 1)
    return 1
  end
end
redis.call('ZREM', S.slots, value)
redis.call('HDEL', S.rec, value)
sem_wake(S, wake, limit - sem_prune(S, wake, ms))
return 1
