-- Stores a checkpoint only for the lock's live holder, by its token.
-- KEYS: lock, checkpoint (one hash tag: one slot).
-- ARGV: token (decimal), value.
-- Returns 1 when stored, 0 when the lock is not held with that token.
-- The lock's value starts with its token (see acquire.lua); the tokens are
-- compared as text, so no Lua number rounds them.
local cur = redis.call('GET', KEYS[1])
if not cur or string.match(cur, '^(%d+) ') ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2])
return 1
