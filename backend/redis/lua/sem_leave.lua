-- Takes a waiter that stopped waiting out of a semaphore's queue, and
-- wakes the waiters that its place let through.
-- KEYS: the semaphore's parts (see sem.lua).
-- ARGV: waiter id, waiters' channel prefix.
-- Returns 1 when the waiter was queued, else 0.
local S = sem_keys(1)
if redis.call('ZREM', S.queue, ARGV[1]) == 0 then
  return 0
end
redis.call('ZREM', S.qexp, ARGV[1])
local limit = sem_limit(S)
sem_wake(S, ARGV[2], limit - sem_prune(S, ARGV[2], ms_of(now_us())))
return 1
