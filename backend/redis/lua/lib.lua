-- Helpers shared by the scripts below; scripts.go puts this file in front
-- of each script that needs it (Redis has no script includes).

-- now_us is the server's clock in microseconds.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- int formats a whole number exactly: Redis turns Lua numbers given to
-- commands into text with %.17g, and tokens are near 2^51.
local function int(n)
  return string.format('%d', n)
end

-- below tells whether a is less than b, both decimal integers as Redis
-- writes them (no leading zeros), b not negative: compared as text, since
-- a Lua number (a double) is exact only up to 2^53.
local function below(a, b)
  if string.sub(a, 1, 1) == '-' or #a < #b then
    return true
  end
  if #a > #b then
    return false
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return false
end

-- next_token moves the counter to the next token and returns it as text:
-- the counter plus one, exact (INCR counts in 64 bits on the server, and
-- the result is read back as text, never as a Lua number), or now (the
-- clock in microseconds, as text) when the counter is below it. A counter that cannot
-- grow (2^63-1, or not an integer) is an error reply starting with
-- TOKENRANGE, and nothing is written.
local function next_token(counter, now)
  local n = redis.pcall('INCR', counter)
  if type(n) == 'table' and n.err then
    return redis.error_reply('TOKENRANGE ' .. counter .. ': ' .. n.err)
  end
  local token = redis.call('GET', counter)
  if below(token, now) then
    token = now
    redis.call('SET', counter, now)
  end
  return token
end

-- wake_next tells the first waiter that still listens that the lock is
-- free, so that a release costs one message, not one per waiter. Each
-- entry is popped before its message: a waiter that is gone (PUBLISH
-- reaches nobody) is dropped on the way, and a waiter that was told but
-- lost the race puts itself back at its old place when it tries again.
-- The loop is bounded to keep the script short; leftovers expire with the
-- queue.
local function wake_next(queue, channel_prefix)
  for _ = 1, 32 do
    local head = redis.call('ZPOPMIN', queue)[1]
    if not head then
      return
    end
    if redis.call('PUBLISH', channel_prefix .. head, 'free') > 0 then
      return
    end
  end
end

-- record writes the holder's record beside a new lock value: the value it
-- belongs to (a record of an older grant is ignored), the grant's and last
-- renewal's server time in microseconds, and the holder's info.
local function record(meta, value, info, ttl)
  local now = int(now_us())
  redis.call('DEL', meta)
  redis.call('HSET', meta, 'value', value, 'since', now, 'renewed', now, 'info', info)
  redis.call('PEXPIRE', meta, ttl)
end

-- restart_left tells how long a free lock stays closed because the server
-- started less than wait ms ago. A restarted server's data may be older
-- than its restart (none kept, a snapshot, a second of AOF): a lock taken
-- before it then looks free while its holder's command still runs, until
-- that holder's next renewal fails, within its TTL. Returns the ms left
-- and the uptime INFO gives (s), or nil when the wait is over (or 0).
-- INFO's uptime is the wall clock's whole seconds minus those of the
-- start, more than the real uptime by up to a second: a second is taken
-- off, so the wait is never short. A clock stepped back gives a negative
-- uptime: taken as 0. INFO refused by an ACL is an error reply (NOPERM),
-- and INFO without an uptime one starting with RESTARTWAIT: never a grant.
local function restart_left(wait)
  wait = tonumber(wait)
  if wait <= 0 then
    return nil
  end
  local info = redis.pcall('INFO', 'server')
  if type(info) ~= 'string' then
    return redis.error_reply('NOPERM INFO, which tells the server\'s uptime (see restart_wait), is refused: allow it to the ACL user (+info) (' .. tostring(info.err) .. ')')
  end
  local up = tonumber(string.match(info, 'uptime_in_seconds:(-?%d+)'))
  if not up then
    return redis.error_reply('RESTARTWAIT the server\'s INFO gives no uptime_in_seconds')
  end
  local sure = math.max(up - 1, 0) * 1000
  if sure >= wait then
    return nil
  end
  return wait - sure, math.max(up, 0)
end
