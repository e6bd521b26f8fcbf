-- The grants of a key that ended on one master (given up, broken or
-- revoked there), for renew.lua, which takes a master where the lock is
-- free back for a lease unless that lease's grant ended there. Each
-- script passes three keys in a row, read with ended_keys: the token
-- counter; a sorted set of the tokens of single grants that ended, each
-- scored with the master's clock in ms until which it counts (until the
-- grant would have expired anyway); and a token at or below which every
-- grant ended here for good (a force, a revoke of every holder).

local function ended_keys(i)
  return {counter = KEYS[i], tokens = KEYS[i + 1], floor = KEYS[i + 2]}
end

local function now_ms()
  return math.floor(now_us() / 1000)
end

-- ended records that the grant of token ended here, for keep ms; token
-- '0' ends every grant up to the counter, for good.
local function ended(E, token, keep)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', E.tokens, '-inf', now)
  if token ~= '0' then
    redis.call('ZADD', E.tokens, now + keep, token)
    return
  end
  local last = redis.call('GET', E.counter)
  if last then
    redis.call('SET', E.floor, last)
  end
end

-- was_ended tells whether the grant of token ended here.
local function was_ended(E, token)
  local floor = redis.call('GET', E.floor)
  if floor and not below(floor, token) then
    return true
  end
  local until_ms = redis.call('ZSCORE', E.tokens, token)
  return until_ms ~= false and tonumber(until_ms) > now_ms()
end
