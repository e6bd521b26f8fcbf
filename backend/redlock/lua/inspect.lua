-- Reads one master's view of a lock in one step.
-- KEYS: lock, token counter, holder record.
-- Returns {value or nil, pttl, counter or nil, since, renewed, info}.
local r = redis.call('HMGET', KEYS[3], 'since', 'renewed', 'info')
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]), r[1], r[2], r[3]}
