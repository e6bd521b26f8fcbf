-- Breaks the lock on one master whoever holds it, and wakes the next
-- waiter; the token counter stays.
-- KEYS: lock, waiters' queue, holder record. ARGV: waiters' channel prefix.
-- Returns 1 when a lock was broken, 0 when it was free.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[3])
wake_next(KEYS[2], ARGV[1])
return 1
