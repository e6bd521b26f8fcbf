-- Stores a checkpoint on one master only for the lock's holder there, by
-- its token, and never over a checkpoint of a newer token.
-- KEYS: lock, checkpoint. ARGV: token (decimal, no leading zeros), value.
-- Returns 1 when stored, 0 when refused. Tokens are compared as text
-- (longer is larger, then byte by byte), so no Lua number rounds them.
local cur = redis.call('GET', KEYS[1])
if not cur or string.match(cur, '^(%d+) ') ~= ARGV[1] then
  return 0
end
local old = redis.call('GET', KEYS[2])
local seen = old and string.match(old, '^(%d+) ')
if seen and (#seen > #ARGV[1] or (#seen == #ARGV[1] and seen > ARGV[1])) then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2])
return 1
