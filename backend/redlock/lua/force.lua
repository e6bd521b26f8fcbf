-- Breaks the lock on one master whoever holds it: the plain lock or every
-- holder of a semaphore, and wakes the next waiters; the token counter
-- stays, and every grant up to it is recorded as ended (ended.lua).
-- KEYS: lock, waiters' queue, holder record, the grant history's four
--       (see ended.lua), then a semaphore's parts (see package redis's
--       sem.lua). ARGV: waiters' channel prefix.
-- Returns 1 when something was broken, 0 when the key was free.
ended(ended_keys(4), '0', 0)
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('DEL', KEYS[1], KEYS[3])
  wake_next(KEYS[2], ARGV[1])
  return 1
end
local S = sem_keys(8)
if redis.call('ZCARD', S.slots) == 0 then
  return 0
end
local limit = sem_limit(S)
redis.call('DEL', S.slots, S.rec)
sem_wake(S, ARGV[1], limit - sem_prune(S, ARGV[1], ms_of(now_us())))
return 1
