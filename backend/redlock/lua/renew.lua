-- Extends the lock on one master while it holds this lease's value and
-- was not released into its minimum hold (the record's mark). Where the
-- lock is free, this lease's grant round reached this master (its
-- counter is at least the token), the key is no semaphore here and this
-- lease's grant did not end here (ended.lua), it takes the lock, as a
-- grant that came late: a lease granted by a bare majority gets its
-- spare master back, so that one master failing next does not cost it
-- the lock. (While the lease holds a majority, nobody else can; a grant
-- of a higher token here since then was one that no majority gave.)
-- KEYS: lock, holder record, the ended grants' three (see ended.lua),
--       semaphore limit.
-- ARGV: value, px in ms, token (decimal), holder info (JSON).
-- Returns 1 when extended, 2 when taken, 0 when not ours there.
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
if cur or redis.call('EXISTS', KEYS[6]) == 1 then
  return 0
end
local last = redis.call('GET', E.counter)
if not last or below(last, token) or was_ended(E, token) then
  return 0
end
redis.call('SET', lock, value, 'PX', px)
local now = int(now_us())
redis.call('DEL', record)
redis.call('HSET', record, 'since', now, 'renewed', now, 'info', ARGV[4])
redis.call('PEXPIRE', record, px)
return 2
