-- Deletes the lock only while it still holds this lease's value, and wakes
-- the next waiter.
-- KEYS: lock, waiters' queue. ARGV: value, waiters' channel prefix.
-- Returns 1 when released, 0 when the lock was no longer ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
wake_next(KEYS[2], ARGV[2])
return 1
