-- Stores a checkpoint on one master only for the lock's holder there, by
-- its token, and never over a newer checkpoint: one of a newer token, or
-- a later write (seq) of the same token.
-- KEYS: lock, checkpoint. ARGV: token, seq (decimal, no leading zeros),
-- value. Stored as "TOKEN SEQ VALUE". Returns 1 when stored, 0 when
-- refused. Numbers are compared as text (longer is larger, then byte by
-- byte), so no Lua number rounds them.
local function newer(a, b)
  return #a > #b or (#a == #b and a > b)
end
local cur = redis.call('GET', KEYS[1])
if not cur or string.match(cur, '^(%d+) ') ~= ARGV[1] then
  return 0
end
local old = redis.call('GET', KEYS[2])
if old then
  local tok, seq = string.match(old, '^(%d+) (%d+) ')
  if tok and (newer(tok, ARGV[1]) or (tok == ARGV[1] and not newer(ARGV[2], seq))) then
    return 0
  end
end
redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
return 1
