-- Activate (SPEC A19): the given pods move to active, only if unschedulable or backing off.
-- ARGV: pod keys. Returns the number moved.
local moved = 0
for i = 1, #ARGV do
  local key = ARGV[i]
  local loc = redis.call('HGET', C_LOC, key)
  if loc == 'u' or loc == 'b' then
    remove_from_queue(key, loc)
    to_active(key)
    moved = moved + 1
  end
end
return moved
