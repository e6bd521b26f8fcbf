-- Reads one master's view of a lock, plain or semaphore, in one step.
-- KEYS: lock, token counter, holder record, then a semaphore's parts
--       (see package redis's sem.lua).
-- Returns {value or nil, pttl, counter or nil, since, renewed, info,
--          the semaphore's limit or nil, its holders (see sem_holders),
--          the value whose lease was revoked (revoke.lua) or nil}.
local r = redis.call('HMGET', KEYS[3], 'since', 'renewed', 'info', 'revoked')
local S = sem_keys(4)
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]), r[1], r[2], r[3],
  redis.call('GET', S.limit), sem_holders(S, ms_of(now_us())), r[4]}
