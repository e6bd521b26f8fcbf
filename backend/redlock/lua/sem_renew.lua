-- Extends a semaphore holder's lease on one master only while its slot
-- there still holds this lease's value, has not ended, and was not
-- released into its minimum hold.
-- KEYS: the semaphore's parts (see package redis's sem.lua), its slot
--       index. ARGV: value, px in ms.
-- Returns 1 when extended, 0 when the slot is not ours there.
local S = sem_keys(1)
local value, px = ARGV[1], tonumber(ARGV[2])
local now = now_us()
local ms = ms_of(now)
local r = sem_live(S, value, ms)
if not r then
  return 0
end
redis.call('ZADD', S.slots, 'XX', int(ms + px), value)
redis.call('HSET', S.rec, value, r.since .. ' ' .. int(now) .. ' 0 ' .. r.info)
sem_keep(S, px)
keep(KEYS[6], px)
return 1
