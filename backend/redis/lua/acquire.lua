-- Takes the lock when it is free, in one round trip.
-- KEYS: lock, token counter, waiters' queue, holder's record, then a
--       semaphore's parts (see sem.lua); one hash tag: one slot.
-- ARGV: ttl in ms, run id, holder, waiter id ('' when not queuing),
--       the waiter's place in the queue ('' the first time: now), the
--       holder's info (JSON), waiters' channel prefix, the restart wait
--       in ms (see restart_left).
-- Returns {1, value, ttl, server time in us} when granted,
--         {0, value, pttl, place} when held by someone else,
--         {2, limit} when the key is a semaphore (held or awaited),
--         {3, ms left, uptime in s} when the server started too lately.

local lock, counter, queue, meta = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ttl, run, holder, waiter, place = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local now = now_us()
local cur = redis.call('GET', lock)
if cur then
  -- The same run holding it means our earlier grant's reply was lost and
  -- this is the caller's retry: hand the lease back instead of refusing.
  if run ~= '' and string.match(cur, '^%d+ (%S*) ') == run and not redis.call('HGET', meta, 'released') then
    redis.call('PEXPIRE', lock, ttl)
    redis.call('PEXPIRE', meta, ttl)
    return {1, cur, tonumber(ttl), now}
  end
  local pttl = redis.call('PTTL', lock)
  if waiter ~= '' then
    if place == '' then
      place = int(now)
    end
    redis.call('ZADD', queue, 'NX', place, waiter)
    -- The waiter comes back by the holder's expiry at the latest; keep
    -- the queue until a while after that, so that it vanishes once every
    -- waiter is gone.
    local keep = math.max(pttl, tonumber(ttl)) + math.max(tonumber(ttl), 1000)
    if redis.call('PTTL', queue) < keep then
      redis.call('PEXPIRE', queue, keep)
    end
  end
  return {0, cur, pttl, place}
end

-- A semaphore excludes the plain lock while it has holders or waiters.
-- Its limit key exists exactly then (or a little longer: pruning tells).
if redis.call('EXISTS', KEYS[5]) == 1 then
  local S = sem_keys(5)
  sem_prune(S, ARGV[7], ms_of(now))
  local have = redis.call('GET', S.limit)
  if have then
    return {2, have}
  end
end

local left, up = restart_left(ARGV[8])
if type(left) == 'table' then
  return left
elseif left then
  return {3, left, up}
end

-- The token: the last one plus one, and never less than the server's clock
-- in microseconds, so that it still grows when the counter is lost
-- (FLUSHALL, a restart without persistence, a failover to a stale replica).
local token = next_token(counter, int(now))
if type(token) == 'table' then
  return token
end
local value = token .. ' ' .. run .. ' ' .. holder
redis.call('SET', lock, value, 'PX', ttl)
record(meta, value, ARGV[6], ttl)
if waiter ~= '' then
  redis.call('ZREM', queue, waiter)
end
return {1, value, tonumber(ttl), now}
