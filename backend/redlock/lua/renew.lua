-- Extends the lock on one master while it holds this lease's value and
-- was not released into its minimum hold (the record's mark). Where the
-- lock is free, the key is no semaphore here, this master refused this
-- lease's grant (another acquirer's grant held it then, one that no
-- majority gave) and the grant did not end here since (ended.lua), it
-- takes the lock, as a grant that came late: a lease granted by a bare
-- majority gets its spare master back, so that one master failing next
-- does not cost it the lock. Only refused masters are taken, fewer than
-- a majority: a renewal that succeeds extended the lease on at least one
-- master that granted it.
-- KEYS: lock, holder record, the grant history's four (see ended.lua),
--       semaphore limit.
-- ARGV: value, px in ms, token (decimal), holder info (JSON), '1' where
--       the client heard this master refuse the grant (else '0').
-- Returns 1 when extended, 2 when taken, 3 when free but not to be taken,
-- 0 when another's.
local lock, record, E = KEYS[1], KEYS[2], ended_keys(3)
local value, px, token = ARGV[1], ARGV[2], ARGV[3]
local cur = redis.call('GET', lock)
if cur == value then
  if redis.call('HGET', record, 'released') == value then
    return 0
  end
  redis.call('PEXPIRE', lock, px)
  redis.call('HSET', record, 'renewed', int(now_us()))
  redis.call('PEXPIRE', record, px)
  return 1
end
if cur or ARGV[5] ~= '1' then
  return 0
end
if redis.call('EXISTS', KEYS[7]) == 1 or not may_take(E, token, tonumber(px)) then
  return 3
end
redis.call('SET', lock, value, 'PX', px)
local now = int(now_us())
redis.call('DEL', record)
redis.call('HSET', record, 'since', now, 'renewed', now, 'info', ARGV[4])
redis.call('PEXPIRE', record, px)
return 2
