-- Extends the lock on one master only while it holds this lease's value
-- and was not released into its minimum hold (the record's mark).
-- KEYS: lock, holder record. ARGV: value, px in ms.
-- Returns 1 when extended, 0 when the lock is not ours there.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('HGET', KEYS[2], 'released') == ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], 'renewed', int(now_us()))
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
