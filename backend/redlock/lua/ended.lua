-- A key's grant history on one master, for renew.lua, which takes a
-- master where the lock is free back for a lease whose grant this master
-- refused (it was held by another acquirer's grant, since given back),
-- unless that lease's grant ended here. Each script passes four keys in
-- a row, read with ended_keys:
--   the token counter;
--   tokens: the grants that ended here (given up, broken, revoked);
--   floor: "TOKEN MS", a token at or below which every grant ended here
--          for good (a force, a revoke of every holder), and when;
--   refused: the grants refused here.
-- The two sorted sets score each token with the master's clock in ms
-- until which it counts (about when that grant would have expired).

local function ended_keys(i)
  return {counter = KEYS[i], tokens = KEYS[i + 1], floor = KEYS[i + 2], refused = KEYS[i + 3]}
end

local function now_ms()
  return math.floor(now_us() / 1000)
end

-- note adds token to the sorted set key for keep ms (never shortening an
-- entry: ZADD GT is Redis 6.2's), drops the entries that no longer count,
-- and lets the set expire with its last entry.
local function note(key, token, keep)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local have = redis.call('ZSCORE', key, token)
  if not have or tonumber(have) < now + keep then
    redis.call('ZADD', key, now + keep, token)
  end
  if redis.call('PTTL', key) < keep then
    redis.call('PEXPIRE', key, keep)
  end
end

local function counts(key, token)
  local until_ms = redis.call('ZSCORE', key, token)
  return until_ms ~= false and tonumber(until_ms) > now_ms()
end

-- ended records that the grant of token ended here, for keep ms; token
-- '0' ends every grant up to the counter, for good. (A refusal raised the
-- counter to its token, or found it higher: every grant refused here
-- before is at or below it. A refusal that lands after it may be of a
-- grant round that had begun before it: see may_take.)
local function ended(E, token, keep)
  if token ~= '0' then
    note(E.tokens, token, keep)
    return
  end
  local last = redis.call('GET', E.counter) or '0'
  redis.call('SET', E.floor, last .. ' ' .. int(now_ms()))
end

-- refused records that the grant of token was refused here, for keep ms.
local function refused(E, token, keep)
  note(E.refused, token, keep)
end

-- may_take tells whether the lease of token and px may take this master
-- back: its grant was refused here and has not ended here, nor was a
-- floor set here within px before the refusal (the grant round may have
-- begun before the floor: a round lasts well under px). The client takes
-- back only a master whose refusal its grant round heard; that both agree
-- guards against a master restarted empty.
local function may_take(E, token, px)
  local refused_until = redis.call('ZSCORE', E.refused, token)
  if not refused_until or tonumber(refused_until) <= now_ms() or counts(E.tokens, token) then
    return false
  end
  local set = redis.call('GET', E.floor)
  if not set then
    return true
  end
  local floor, set_ms = string.match(set, '^(%d+) (%d+)$')
  return floor ~= nil and below(floor, token) and tonumber(refused_until) - 2 * px - tonumber(set_ms) >= px
end
