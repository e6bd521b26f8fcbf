#!lua name=lockrun
-- The write-side fence as a Redis 7 function library, which `lockrun init`
-- loads with FUNCTION LOAD REPLACE. Each function keeps, in the key it is
-- given, the highest fencing token seen for one resource, and refuses a
-- lower token with an error that starts with FENCED. Equal passes: one
-- holder writes many times with its token.
--
--   FCALL lockrun_fence 1 FENCEKEY TOKEN
--     records TOKEN; returns it.
--   FCALL lockrun_fenced_set 2 FENCEKEY KEY TOKEN VALUE [SET options...]
--     records TOKEN and SETs KEY to VALUE in the same atomic step.
--
-- A separate FCALL followed by a write leaves a window (Redis cannot roll
-- a write back); lockrun_fenced_set, or a function of your own that does
-- the same check, closes it.
--
-- Tokens are decimal uint64 and may exceed 2^53, where Lua numbers (doubles)
-- stop being exact, so they are compared as canonical decimal strings:
-- the longer is larger, and equal lengths compare digit by digit.

local MAX = '18446744073709551615'

-- canonical is s without leading zeros when s is a decimal uint64, else nil.
local function canonical(s)
  if type(s) ~= 'string' or not string.find(s, '^%d+$') then
    return nil
  end
  local c = (string.gsub(s, '^0+', ''))
  if c == '' then
    c = '0'
  end
  if #c > #MAX or (#c == #MAX and not (c <= MAX)) then
    return nil
  end
  return c
end

-- less reports a < b for canonical decimals, byte by byte so that no
-- locale's collation is involved.
local function less(a, b)
  if #a ~= #b then
    return #a < #b
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return false
end

-- check records token in fence_key, or returns an error reply.
local function check(fence_key, token)
  local tok = canonical(token)
  if not tok then
    return nil, redis.error_reply('ERR lockrun: the token must be a decimal uint64')
  end
  local stored = redis.call('GET', fence_key)
  if stored then
    local seen = canonical(stored)
    if not seen then
      return nil, redis.error_reply('ERR lockrun: ' .. fence_key .. ' does not hold a token')
    end
    if less(tok, seen) then
      return nil, redis.error_reply('FENCED token ' .. tok .. ' is older than ' .. seen ..
        ' recorded in ' .. fence_key .. ': a newer lock holder has written')
    end
  end
  redis.call('SET', fence_key, tok)
  return tok
end

redis.register_function('lockrun_fence', function(keys, args)
  local tok, err = check(keys[1], args[1])
  return tok or err
end)

redis.register_function('lockrun_fenced_set', function(keys, args)
  local tok, err = check(keys[1], args[1])
  if not tok then
    return err
  end
  return redis.call('SET', keys[2], args[2], unpack(args, 3))
end)
