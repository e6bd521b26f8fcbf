-- Reads a lock in one consistent step.
-- KEYS: lock, token counter, holder's record.
-- Returns {value or nil, pttl, last token issued or nil,
--          {record's value, since, renewed, info}}.
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]),
  redis.call('HMGET', KEYS[3], 'value', 'since', 'renewed', 'info')}
