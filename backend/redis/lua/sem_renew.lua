-- Extends a semaphore holder's lease only while its slot still holds this
-- lease's value, has not ended, and was not released into its minimum
-- hold; notes the renewal in its record.
-- KEYS: the semaphore's parts (see sem.lua). ARGV: value, ttl in ms.
-- Returns 1 when extended, else 0.
local S = sem_keys(1)
local value, ttl = ARGV[1], tonumber(ARGV[2])
local now = now_us()
local ms = ms_of(now)
local r = sem_live(S, value, ms)
if not r then
  return 0
end
redis.call('ZADD', S.slots, 'XX', int(ms + ttl + 1), value)
redis.call('HSET', S.rec, value, r.since .. ' ' .. int(now) .. ' 0 ' .. r.info)
sem_keep(S, ttl + 1)
return 1
