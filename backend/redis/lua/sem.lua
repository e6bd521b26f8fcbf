-- Helpers of the semaphore scripts (AcquireOptions.Limit > 1); scripts.go
-- puts this file after lib.lua in front of each script that needs it.
--
-- A semaphore is five keys of the lock's hash tag, S below:
--   S.limit  string: the key's limit, while it has holders or waiters
--   S.slots  sorted set: each holder's lock value ("TOKEN RUN HOLDER"),
--            scored by the end of its lease in the server's ms
--   S.rec    hash: lock value -> "SINCE RENEWED RELEASED INFO" (server
--            µs at the grant and the last renewal, 1 once released into
--            its minimum hold, the holder's info as JSON)
--   S.queue  sorted set: waiter id -> its place (server µs, first try)
--   S.qexp   sorted set: waiter id -> the end of its queue entry (ms),
--            pushed on by each of its tries
-- Every key expires no sooner than the last lease or entry it keeps, so
-- that a semaphore whose holders and waiters all died vanishes by itself.

-- sem_keys names the parts of a semaphore from KEYS, from index i on.
local function sem_keys(i)
  return {limit = KEYS[i], slots = KEYS[i + 1], rec = KEYS[i + 2], queue = KEYS[i + 3], qexp = KEYS[i + 4]}
end

-- ms_of is a server time in µs in whole ms, rounded down.
local function ms_of(us)
  return math.floor(us / 1000)
end

-- keep makes key last at least ms more (a key without expiry gets one).
local function keep(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end

-- sem_keep makes every part of S last at least ms more.
local function sem_keep(S, ms)
  for _, k in ipairs({S.limit, S.slots, S.rec, S.queue, S.qexp}) do
    keep(k, ms)
  end
end

-- remove_all removes the members of list from the sorted set or hash key,
-- in chunks that unpack can take.
local function remove_all(cmd, key, list)
  for i = 1, #list, 500 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 499, #list)))
  end
end

-- drop_waiter takes waiter w out of the queue.
local function drop_waiter(S, w)
  redis.call('ZREM', S.queue, w)
  redis.call('ZREM', S.qexp, w)
end

-- sem_ahead counts the live waiters queued before me (every waiter, for a
-- newcomer: me == ''), up to most. A waiter whose channel has no listener
-- any more (its connection closed: the process died or gave up) is dropped
-- on the way, so a crashed waiter never holds a slot back.
local function sem_ahead(S, wake, me, most)
  local n = 0
  while n < most do
    local w = redis.call('ZRANGE', S.queue, n, n)[1]
    if not w or w == me then
      break
    end
    if redis.call('PUBSUB', 'NUMSUB', wake .. w)[2] > 0 then
      n = n + 1
    else
      drop_waiter(S, w)
    end
  end
  return n
end

-- sem_prune drops the holders whose lease ended by ms and the waiters
-- whose entry did, and, when neither holder nor live waiter is left, the
-- whole semaphore (its limit included). Returns the live holders' count.
local function sem_prune(S, wake, ms)
  local ended = redis.call('ZRANGEBYSCORE', S.slots, '-inf', int(ms))
  if #ended > 0 then
    remove_all('ZREM', S.slots, ended)
    remove_all('HDEL', S.rec, ended)
  end
  local left = redis.call('ZRANGEBYSCORE', S.qexp, '-inf', int(ms))
  if #left > 0 then
    remove_all('ZREM', S.qexp, left)
    remove_all('ZREM', S.queue, left)
  end
  local n = redis.call('ZCARD', S.slots)
  if n == 0 and sem_ahead(S, wake, '', 1) == 0 then
    redis.call('DEL', S.limit, S.slots, S.rec, S.queue, S.qexp)
  end
  return n
end

-- sem_wake tells the first k live waiters that a slot may be theirs; a
-- waiter that nobody listens for is dropped on the way. Woken waiters
-- stay in the queue, at their place, until they are granted or leave.
local function sem_wake(S, wake, k)
  local i = 0
  while i < k do
    local w = redis.call('ZRANGE', S.queue, i, i)[1]
    if not w then
      return
    end
    if redis.call('PUBLISH', wake .. w, 'free') > 0 then
      i = i + 1
    else
      drop_waiter(S, w)
    end
  end
end

-- sem_limit is the key's limit as a number (1 when none is stored).
local function sem_limit(S)
  return tonumber(redis.call('GET', S.limit) or '1') or 1
end

-- sem_holders is {value, ms left, record, ...} for every holder whose
-- lease has not ended by ms, soonest end first. A slot's score is its
-- grant or renewal's ms + ttl + 1 (live while the score is above the
-- clock): the time left leaves that 1 out, so that it never exceeds the TTL.
local function sem_holders(S, ms)
  local out = {}
  local hs = redis.call('ZRANGEBYSCORE', S.slots, '(' .. int(ms), '+inf', 'WITHSCORES')
  for i = 1, #hs, 2 do
    out[#out + 1] = hs[i]
    out[#out + 1] = tonumber(hs[i + 1]) - ms - 1
    out[#out + 1] = redis.call('HGET', S.rec, hs[i]) or false
  end
  return out
end

-- sem_live is the record of holder value when its lease has not ended by
-- ms and it was not released into its minimum hold, split into since,
-- renewed and info; nil otherwise.
local function sem_live(S, value, ms)
  local score = redis.call('ZSCORE', S.slots, value)
  if not score or tonumber(score) <= ms then
    return nil
  end
  local rec = redis.call('HGET', S.rec, value)
  local since, renewed, released, info = string.match(rec or '', '^(%d+) (%d+) (%d) (.*)$')
  if not since or released ~= '0' then
    return nil
  end
  return {since = since, renewed = renewed, info = info}
end

-- sem_token_of is the token of lock value v, as text.
local function sem_token_of(v)
  return string.match(v, '^(%d+) ')
end

-- sem_revoked tells whether holder value's lease has not ended by ms and
-- it was revoked (RELEASED "2" in its record, see revoke.lua): its own
-- release then frees its slot at once.
local function sem_revoked(S, value, ms)
  local score = redis.call('ZSCORE', S.slots, value)
  if not score or tonumber(score) <= ms then
    return false
  end
  return string.match(redis.call('HGET', S.rec, value) or '', '^%d+ %d+ 2 ') ~= nil
end
