-- Takes slot INDEX of a semaphore on one master when no live holder has
-- it here (or an earlier attempt of the same run has), no live waiter
-- queued before this caller is still to be served, and the token is above
-- every token this master has recorded. One holder per index per master:
-- a slot index granted by a majority is exclusive, as a plain Redlock
-- lock is, so no more than LIMIT holders ever hold a majority.
-- KEYS: lock (the plain lock), token counter, the semaphore's parts (see
--       package redis's sem.lua), its slot index (hash: index -> value).
-- ARGV: value ("TOKEN RUN HOLDER"), px in ms, token (decimal), run id,
--       waiter id ('' when not queued), holder info (JSON), limit, index,
--       waiters' channel prefix, restart wait in ms (see restart_left).
-- The counter is raised to the token whether or not the slot is granted,
-- as grant.lua does.
-- Returns {1, value} when granted, {0, value, pttl} when another run has
-- the index here, {2, counter} when the token is not above the counter,
-- {3, limit} when the key is held or awaited with another limit here
-- ('1': the plain lock), {4} when waiters queued first are still to be
-- served, {5, ms left, uptime in s} when this master started less than
-- the restart wait ago, as grant.lua.
local lock, counter = KEYS[1], KEYS[2]
local S = sem_keys(3)
local slotof = KEYS[8]
local value, px, token, run, waiter, info, limit, index, wake =
  ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]

if redis.call('EXISTS', lock) == 1 then
  return {3, '1'}
end
local now = now_us()
local ms = ms_of(now)
local held = sem_prune(S, wake, ms)
local have = redis.call('GET', S.limit)
if have and have ~= limit then
  return {3, have}
end
local last = redis.call('GET', counter)
if last and not string.match(last, '^%d+$') then
  return redis.error_reply('token counter ' .. counter .. ' is not a number')
end
-- Exact comparison of decimal strings: Lua numbers are doubles.
local above = not last or #token > #last or #token == #last and token > last

local cur = redis.call('HGET', slotof, index)
local score = cur and redis.call('ZSCORE', S.slots, cur)
local live = score and tonumber(score) > ms
if live and cur ~= value and string.match(cur, '^%d+ (%S*) ') ~= run then
  if above then
    redis.call('SET', counter, token)
  end
  return {0, cur, tonumber(score) - ms}
end
if cur ~= value then
  local free = tonumber(limit) - held
  if live then
    free = free + 1 -- our own earlier attempt's, replaced below
  end
  if sem_ahead(S, wake, waiter, free) >= free then
    return {4}
  end
  local left, up = restart_left(ARGV[10])
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
  if live then
    redis.call('ZREM', S.slots, cur)
    redis.call('HDEL', S.rec, cur)
  end
end
redis.call('ZADD', S.slots, int(ms + px), value)
redis.call('HSET', slotof, index, value)
redis.call('HSET', S.rec, value, int(now) .. ' ' .. int(now) .. ' 0 ' .. info)
redis.call('SET', S.limit, limit, 'NX')
if waiter ~= '' then
  drop_waiter(S, waiter)
end
sem_keep(S, px)
keep(slotof, px)
return {1, value}
