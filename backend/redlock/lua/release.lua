-- Gives the lock up on one master only while it holds this lease's value
-- and was not already released into its minimum hold: at once, waking
-- the next waiter, or, for a minimum hold, when keep ms have passed, on
-- the master's own expiry.
-- Either way, and whether or not the lock was ours here, the lease's
-- grant is recorded as ended here (ended.lua) for two TTLs, as long as a
-- refusal of it counts: renew.lua never takes this master back for it.
-- KEYS: lock, waiters' queue, holder record, the grant history's four
--       (see ended.lua).
-- ARGV: value, waiters' channel prefix, keep in ms (0: now), px in ms.
-- A revoked lease (see revoke.lua) frees the lock here at once, minimum
-- hold or not.
-- Returns 1 when released (or left to expire), 2 when released after a
-- revoke, 0 when not ours there.
local token = string.match(ARGV[1], '^(%d+) ')
if token then
  ended(ended_keys(4), token, 2 * tonumber(ARGV[4]))
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if redis.call('HGET', KEYS[3], 'revoked') == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[3])
  wake_next(KEYS[2], ARGV[2])
  return 2
end
if redis.call('HGET', KEYS[3], 'released') == ARGV[1] then
  return 0
end
local keep = tonumber(ARGV[3])
if keep > 0 then
  -- The mark ends the lease here: it can no longer renew or release, and
  -- the lock stays taken only until the master expires it.
  redis.call('HSET', KEYS[3], 'released', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], keep)
  redis.call('PEXPIRE', KEYS[3], keep)
  return 1
end
redis.call('DEL', KEYS[1], KEYS[3])
wake_next(KEYS[2], ARGV[2])
return 1
