-- Marks the holder of a key whose token is the given one (every holder
-- when it is '0') revoked, keeping its lock or slot and its expiry: its
-- next renewal fails, anyone else still finds the key taken, and its own
-- release frees it at once (see release.lua, sem_release.lua). Nothing is
-- freed, so nobody is woken; the token counter is left alone.
-- KEYS: lock, holder's record, then a semaphore's parts (see sem.lua).
-- ARGV: token (decimal; '0': every holder).
-- Returns 1 when a holder was marked (or, for '0', always), 0 when no live
-- holder has the token. Tokens are compared as text.
--
-- The plain lock's mark is its record's "released" field set to
-- "revoked": the field a holder's minimum-hold release sets to "1", which
-- every lockrun's renewal already refuses, so a lockrun older than the
-- mark loses the lock at its next renewal too. A semaphore holder's mark
-- is "2" in its record's RELEASED place, which older lockruns read as
-- released as well.
local lock, meta, token = KEYS[1], KEYS[2], ARGV[1]
local cur = redis.call('GET', lock)
if cur then
  if token ~= '0' and sem_token_of(cur) ~= token then
    return 0
  end
  if redis.call('HGET', meta, 'value') ~= cur then
    -- No record of this grant (a lockrun that kept none): start one, so
    -- that the mark belongs to this grant and ends with it.
    redis.call('DEL', meta)
    redis.call('HSET', meta, 'value', cur)
  end
  redis.call('HSETNX', meta, 'released', 'revoked')
  local pttl = redis.call('PTTL', lock)
  if pttl > 0 then
    redis.call('PEXPIRE', meta, pttl)
  end
  return 1
end
local S = sem_keys(3)
local found = 0
for _, v in ipairs(redis.call('ZRANGEBYSCORE', S.slots, '(' .. int(ms_of(now_us())), '+inf')) do
  if token == '0' or sem_token_of(v) == token then
    found = 1
    local rec = redis.call('HGET', S.rec, v) or ''
    local since, renewed, released, info = string.match(rec, '^(%d+) (%d+) (%d) (.*)$')
    if not since then
      since, renewed, released, info = '0', '0', '0', ''
    end
    -- A holder released into its minimum hold keeps its "1": its command
    -- is over already.
    if released == '0' then
      redis.call('HSET', S.rec, v, since .. ' ' .. renewed .. ' 2 ' .. info)
    end
  end
end
if token == '0' then
  return 1
end
return found
