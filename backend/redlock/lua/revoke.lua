-- Marks, on one master, the holder of a key whose token is the given one
-- (every holder when it is '0') revoked, keeping its lock or slot and its
-- expiry there: its renewal fails here, anyone else finds the key taken
-- here, and its own release frees it here at once (see release.lua,
-- sem_release.lua). Nothing is freed, so nobody is woken; the token
-- counter stays. The grant is recorded as ended here (ended.lua), also
-- where it is not found: where the holder lost its copy, its renewal
-- cannot take this master back after the revoke.
-- KEYS: lock, holder record, the grant history's four (see ended.lua),
--       then a semaphore's parts (see package redis's sem.lua).
-- ARGV: token (decimal; '0': every holder), keep in ms.
-- Returns 1 when a holder was marked here, else 0. Tokens are compared as
-- text.
--
-- The plain lock's mark is the record's "revoked" field set to the lock's
-- value, and "released" set to it too: the minimum hold's mark, which
-- every lockrun's renewal already refuses, so a lockrun older than the
-- revoke loses the lock at its next renewal as well. A semaphore holder's
-- mark is "2" in its record's RELEASED place, which older lockruns read as
-- released.
local lock, record, token = KEYS[1], KEYS[2], ARGV[1]
ended(ended_keys(3), token, tonumber(ARGV[2]))
local cur = redis.call('GET', lock)
if cur then
  if token ~= '0' and sem_token_of(cur) ~= token then
    return 0
  end
  -- A holder released into its minimum hold keeps that mark: its
  -- command is over already.
  if redis.call('HGET', record, 'released') ~= cur then
    redis.call('HSET', record, 'revoked', cur, 'released', cur)
  end
  local pttl = redis.call('PTTL', lock)
  if pttl > 0 and redis.call('PTTL', record) < pttl then
    redis.call('PEXPIRE', record, pttl)
  end
  return 1
end
local S = sem_keys(7)
local found = 0
for _, v in ipairs(redis.call('ZRANGEBYSCORE', S.slots, '(' .. int(ms_of(now_us())), '+inf')) do
  if token == '0' or sem_token_of(v) == token then
    found = 1
    local rec = redis.call('HGET', S.rec, v) or ''
    local since, renewed, released, info = string.match(rec, '^(%d+) (%d+) (%d) (.*)$')
    if not since then
      since, renewed, released, info = '0', '0', '0', ''
    end
    -- A holder released into its minimum hold keeps its "1".
    if released == '0' then
      redis.call('HSET', S.rec, v, since .. ' ' .. renewed .. ' 2 ' .. info)
    end
  end
end
return found
