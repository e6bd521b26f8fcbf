-- Reads one master's view of a lock before a grant is tried, and queues
-- the waiter when someone else holds it.
-- KEYS: lock, token counter, waiters' queue, then a semaphore's parts
--       (see package redis's sem.lua).
-- ARGV: waiter id ('' when not queuing), the waiter's place (µs, the same
--       on every master), run id, ttl in ms, waiters' channel prefix.
-- Returns {value or nil, pttl, counter or nil, the server's clock in µs,
--          the limit of a semaphore that has holders or waiters, or nil}.
local lock, counter, queue = KEYS[1], KEYS[2], KEYS[3]
local waiter, place, run, ttl = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local limit = false
if redis.call('EXISTS', KEYS[4]) == 1 then
  local S = sem_keys(4)
  sem_prune(S, ARGV[5], ms_of(now_us()))
  limit = redis.call('GET', S.limit)
end

local cur = redis.call('GET', lock)
local pttl = redis.call('PTTL', lock)
if cur and waiter ~= '' and string.match(cur, '^%d+ (%S*) ') ~= run then
  redis.call('ZADD', queue, 'NX', place, waiter)
  -- Kept until a while after the holder's expiry, when every waiter has
  -- come back: the queue vanishes once nobody waits.
  local keep = math.max(pttl, ttl) + math.max(ttl, 1000)
  if redis.call('PTTL', queue) < keep then
    redis.call('PEXPIRE', queue, keep)
  end
end
return {cur, pttl, redis.call('GET', counter), int(now_us()), limit}
