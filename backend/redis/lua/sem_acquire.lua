-- Takes a slot of a semaphore when one is free and no live waiter queued
-- before this caller is still to be served, in one round trip.
-- KEYS: lock (the plain lock, which excludes any semaphore), token
--       counter, then the semaphore's parts (see sem.lua); one hash tag.
-- ARGV: ttl in ms, run id, holder, limit, waiter id ('' when not
--       queuing), the holder's info (JSON), waiters' channel prefix, the
--       restart wait in ms (see restart_left).
-- Returns {1, value, ttl, server time in µs} when granted,
--         {0, ms until a holder's lease can end, {holders}} when full
--         (see sem_holders), {2, the key's limit} when the key is held
--         or awaited with another limit, {3, ms left, uptime in s} when
--         the server started too lately (the waiter queued all the same).
local lock, counter = KEYS[1], KEYS[2]
local S = sem_keys(3)
local ttl, run, holder, limit, waiter, info, wake = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]

if redis.call('EXISTS', lock) == 1 then
  return {2, '1'}
end
local now = now_us()
local ms = ms_of(now)
local held = sem_prune(S, wake, ms)
local have = redis.call('GET', S.limit)
if have and have ~= limit then
  return {2, have}
end

-- The same run holding a slot means our earlier grant's reply was lost and
-- this is the caller's retry: hand its lease back with a new TTL.
for _, v in ipairs(redis.call('ZRANGEBYSCORE', S.slots, '(' .. int(ms), '+inf')) do
  if string.match(v, '^%d+ (%S*) ') == run then
    local r = sem_live(S, v, ms)
    if r then
      redis.call('ZADD', S.slots, 'XX', int(ms + ttl + 1), v)
      sem_keep(S, ttl + 1)
      return {1, v, ttl, now}
    end
  end
end

local free = tonumber(limit) - held
local left, up
if free > 0 and sem_ahead(S, wake, waiter, free) < free then
  left, up = restart_left(ARGV[8])
  if type(left) == 'table' then
    return left
  elseif not left then
    local token = next_token(counter, int(now))
    if type(token) == 'table' then
      return token
    end
    local value = token .. ' ' .. run .. ' ' .. holder
    redis.call('ZADD', S.slots, int(ms + ttl + 1), value)
    redis.call('HSET', S.rec, value, int(now) .. ' ' .. int(now) .. ' 0 ' .. info)
    redis.call('SET', S.limit, limit, 'NX')
    if waiter ~= '' then
      drop_waiter(S, waiter)
    end
    sem_keep(S, ttl + 1)
    return {1, value, ttl, now}
  end
end

local hs = sem_holders(S, ms)
if waiter ~= '' then
  -- The entry lasts two TTLs and a second from this try; the waiter comes
  -- back within one TTL, so only a waiter that stopped (frozen, cut off)
  -- lets it end.
  local life = 2 * ttl + 1000
  redis.call('ZADD', S.queue, 'NX', int(now), waiter)
  redis.call('ZADD', S.qexp, int(ms + life), waiter)
  redis.call('SET', S.limit, limit, 'NX')
  sem_keep(S, life)
end
if left then
  return {3, left, up}
end
-- Sleep until the soonest end of a lease; a release wakes the waiter
-- sooner. Blocked by waiters ahead only: they are served first, and one
-- that leaves wakes the next.
local retry = ttl
if #hs > 0 then
  retry = math.min(hs[2], ttl)
end
return {0, retry, hs}
