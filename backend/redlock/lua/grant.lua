-- Takes the lock on one master when it is free (or held by an earlier
-- attempt of the same run) and the token is above every token this
-- master has recorded: tokens granted by one master strictly increase.
-- A grant refused because another run holds the lock is recorded in the
-- grant history (ended.lua): renew.lua may take this master back for it.
-- KEYS: lock, token counter, waiters' queue, holder record, the grant
--       history's four (see ended.lua), then a semaphore's parts (see
--       package redis's sem.lua).
-- ARGV: value ("TOKEN RUN HOLDER"), px in ms, token (decimal), run id,
--       waiter id ('' when not queued), holder info (JSON), waiters'
--       channel prefix, restart wait in ms (see restart_left), the
--       waiter's place (µs, as peek.lua).
-- The counter is raised to the token ("set if greater") whether or not
-- the lock is granted here: the more masters know the highest token, the
-- more of them a later acquire's majority can lose and still see it.
-- Returns {1, value} when granted, {0, value, pttl} when held by another
-- run, {2, counter} when the token is not above the counter, {3, limit}
-- when the key is a semaphore here (it has holders or waiters), {5, ms
-- left, uptime in s} when this master started less than the restart wait
-- ago: it may have lost a live lease's copy, so it grants nothing new.
local lock, counter, queue, record = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local value, px, token, run, waiter, info = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]

if redis.call('EXISTS', KEYS[9]) == 1 then
  local S = sem_keys(9)
  sem_prune(S, ARGV[7], ms_of(now_us()))
  local have = redis.call('GET', S.limit)
  if have then
    return {3, have}
  end
end

local cur = redis.call('GET', lock)
local last = redis.call('GET', counter)
if last and not string.match(last, '^%d+$') then
  return redis.error_reply('token counter ' .. counter .. ' is not a number')
end
-- Exact comparison of decimal strings: Lua numbers are doubles.
local above = not last or #token > #last or #token == #last and token > last
-- A revoked lease is never handed back to a retry of its run.
local revoked = cur and redis.call('HGET', record, 'revoked') == cur
if cur and (revoked or cur ~= value and string.match(cur, '^%d+ (%S*) ') ~= run) then
  if above then
    redis.call('SET', counter, token)
  end
  -- For two TTLs: the other grant's copy expires within one, and the next
  -- renewal after that takes this master.
  refused(ended_keys(5), token, 2 * tonumber(px))
  local pttl = redis.call('PTTL', lock)
  if waiter ~= '' then
    -- Queued here as peek.lua queues: a peek that found the lock still
    -- free did not, and this holder's release is the waiter's wake-up.
    redis.call('ZADD', queue, 'NX', ARGV[9], waiter)
    local keep = math.max(pttl, tonumber(px)) + math.max(tonumber(px), 1000)
    if redis.call('PTTL', queue) < keep then
      redis.call('PEXPIRE', queue, keep)
    end
  end
  return {0, cur, pttl}
end
if cur ~= value then
  local left, up = restart_left(ARGV[8])
  if type(left) == 'table' then
    return left
  elseif left then
    if above then
      redis.call('SET', counter, token)
    end
    return {5, left, up}
  end
  if not above then
    return {2, last}
  end
  redis.call('SET', counter, token)
end
redis.call('SET', lock, value, 'PX', px)
local now = int(now_us())
-- A new grant starts a new record: no earlier lease's release mark.
redis.call('DEL', record)
redis.call('HSET', record, 'since', now, 'renewed', now, 'info', info)
redis.call('PEXPIRE', record, px)
if waiter ~= '' then
  redis.call('ZREM', queue, waiter)
end
return {1, value}
