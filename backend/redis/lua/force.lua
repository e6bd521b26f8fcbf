-- Breaks the lock whoever holds it, and wakes the next waiter. The token
-- counter is left alone: the next grant is still above the broken one.
-- KEYS: lock, waiters' queue, holder's record. ARGV: waiters' channel prefix.
-- Returns the broken lock's value, or nil when it was free.
local cur = redis.call('GET', KEYS[1])
if not cur then
  return false
end
redis.call('DEL', KEYS[1], KEYS[3])
wake_next(KEYS[2], ARGV[1])
return cur
