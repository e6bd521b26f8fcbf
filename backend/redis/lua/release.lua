-- Gives the lock up only while it still holds this lease's value, and
-- wakes the next waiter. With a minimum hold that has not ended, the lock
-- stays this lease's until the grant plus the minimum, on the server's own
-- expiry, and the woken waiter comes back by then. A revoked lease (see
-- revoke.lua) frees the lock at once, minimum hold or not: its holder
-- was told to stop, and its release says that it has.
-- KEYS: lock, waiters' queue, holder's record.
-- ARGV: value, waiters' channel prefix, minimum hold in ms (0: none).
-- Returns 1 when released (or left to end), 2 when released after a
-- revoke, 0 when the lock was no longer ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local mark = redis.call('HGET', KEYS[3], 'released')
if mark == 'revoked' and redis.call('HGET', KEYS[3], 'value') == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[3])
  wake_next(KEYS[2], ARGV[2])
  return 2
end
if mark then
  return 0
end
local hold = tonumber(ARGV[3])
if hold > 0 then
  local left = hold
  if redis.call('HGET', KEYS[3], 'value') == ARGV[1] then
    local since = tonumber(redis.call('HGET', KEYS[3], 'since'))
    left = math.ceil((since + hold * 1000 - now_us()) / 1000)
  end
  if left > 0 then
    -- The mark ends the lease: it can no longer renew or release again.
    redis.call('HSET', KEYS[3], 'value', ARGV[1], 'released', '1')
    redis.call('PEXPIRE', KEYS[1], left)
    redis.call('PEXPIRE', KEYS[3], left)
    wake_next(KEYS[2], ARGV[2])
    return 1
  end
end
redis.call('DEL', KEYS[1], KEYS[3])
wake_next(KEYS[2], ARGV[2])
return 1
