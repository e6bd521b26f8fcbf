-- Extends the lock only while it still holds this lease's value.
-- KEYS: lock. ARGV: value, ttl in ms. Returns 1 when extended, else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
