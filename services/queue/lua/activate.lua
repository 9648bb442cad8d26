-- Activate: the given pods move to active, only if unschedulable or backing off.
-- ARGV: pod keys. Returns the number moved.
local moved = 0
for i = 1, #ARGV do
  local key = ARGV[i]
  local s = get_state(key)
  if s then
    local loc = locate(key, s)
    if loc == 'u' or loc == 'b' then
      remove_from_queue(key, loc, s)
      add_active(key, s)
      moved = moved + 1
    end
  end
end
return moved
