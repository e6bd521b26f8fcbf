-- Extends the lock only while it still holds this lease's value and was
-- not released into its minimum hold, and notes the renewal in the
-- holder's record.
-- KEYS: lock, holder's record. ARGV: value, ttl in ms.
-- Returns 1 when extended, else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('HGET', KEYS[2], 'released') then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('HGET', KEYS[2], 'value') == ARGV[1] then
  redis.call('HSET', KEYS[2], 'renewed', int(now_us()))
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
