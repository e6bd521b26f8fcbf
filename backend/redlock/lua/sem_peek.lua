-- Reads one master's view of a semaphore before a grant is tried, and
-- queues the waiter when no slot is its turn here.
-- KEYS: lock (the plain lock), token counter, the semaphore's parts (see
--       package redis's sem.lua), its slot index (hash: index -> value).
-- ARGV: waiter id ('' when not queuing), the waiter's place (µs, the same
--       on every master), run id, ttl in ms, limit, waiters' channel
--       prefix.
-- Returns {plain lock's value or nil, the semaphore's limit or nil,
--          counter or nil, the server's clock in µs,
--          {index, value, ms left, ...} of the live holders,
--          1 when a free slot is this caller's turn here, else 0}.
local lock, counter = KEYS[1], KEYS[2]
local S = sem_keys(3)
local slotof = KEYS[8]
local waiter, place, run, ttl, limit, wake = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]

local now = now_us()
local ms = ms_of(now)
local plain = redis.call('GET', lock)
local have, held = false, 0
if not plain then
  held = sem_prune(S, wake, ms)
  have = redis.call('GET', S.limit)
end
local taken, mine = {}, false
local idx = redis.call('HGETALL', slotof)
for i = 1, #idx, 2 do
  local score = redis.call('ZSCORE', S.slots, idx[i + 1])
  if score and tonumber(score) > ms then
    taken[#taken + 1] = idx[i]
    taken[#taken + 1] = idx[i + 1]
    taken[#taken + 1] = tonumber(score) - ms
    mine = mine or string.match(idx[i + 1], '^%d+ (%S*) ') == run
  end
end
local turn = 0
if not plain and (not have or have == limit) then
  local free = tonumber(limit) - held
  if mine or free > 0 and sem_ahead(S, wake, waiter, free) < free then
    turn = 1
  elseif waiter ~= '' then
    local life = 2 * ttl + 1000
    redis.call('ZADD', S.queue, 'NX', place, waiter)
    redis.call('ZADD', S.qexp, int(ms + life), waiter)
    redis.call('SET', S.limit, limit, 'NX')
    sem_keep(S, life)
    keep(slotof, life)
  end
end
return {plain, have, redis.call('GET', counter), int(now), taken, turn}
