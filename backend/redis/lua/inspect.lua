-- Reads a lock in one consistent step.
-- KEYS: lock, token counter.
-- Returns {value or nil, pttl, last token issued or nil}.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
