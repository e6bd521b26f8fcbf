-- Reads a lock, plain or semaphore, in one consistent step.
-- KEYS: lock, token counter, holder's record, then a semaphore's parts
--       (see sem.lua).
-- Returns {value or nil, pttl, last token issued or nil,
--          {record's value, since, renewed, info, released mark},
--          the semaphore's limit or nil, its holders (see sem_holders)}.
local S = sem_keys(4)
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]),
  redis.call('HMGET', KEYS[3], 'value', 'since', 'renewed', 'info', 'released'),
  redis.call('GET', S.limit), sem_holders(S, ms_of(now_us()))}
