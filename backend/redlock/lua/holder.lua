-- Breaks, on one master, the one holder of a key whose token is the given
-- one: the plain lock's holder, or one holder of a semaphore, and wakes
-- the waiters that may take its place. The token counter stays; the
-- grant is recorded as ended here for keep ms (ended.lua), also where it
-- is not found.
-- KEYS: lock, waiters' queue, holder record, the grant history's four
--       (see ended.lua), then a semaphore's parts (see package redis's
--       sem.lua). ARGV: token (decimal), waiters' channel prefix, keep
--       in ms.
-- Returns 1 when a holder was broken here, else 0. Tokens are compared as
-- text, so no Lua number rounds them.
local token, wake = ARGV[1], ARGV[2]
ended(ended_keys(4), token, tonumber(ARGV[3]))
local cur = redis.call('GET', KEYS[1])
if cur then
  if sem_token_of(cur) ~= token then
    return 0
  end
  redis.call('DEL', KEYS[1], KEYS[3])
  wake_next(KEYS[2], wake)
  return 1
end
local S = sem_keys(8)
local ms = ms_of(now_us())
for _, v in ipairs(redis.call('ZRANGEBYSCORE', S.slots, '(' .. int(ms), '+inf')) do
  if sem_token_of(v) == token then
    local limit = sem_limit(S)
    redis.call('ZREM', S.slots, v)
    redis.call('HDEL', S.rec, v)
    sem_wake(S, wake, limit - sem_prune(S, wake, ms))
    return 1
  end
end
return 0
