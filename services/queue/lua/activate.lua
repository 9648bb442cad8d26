-- Activate (SPEC A19): the given pods move to active, only if unschedulable or backing off.
-- ARGV: pod keys. Returns the number moved.
local moved = 0
for i = 1, #ARGV do
  local key = ARGV[i]
  local loc = nil
  if redis.call('ZSCORE', K_UNSCHED, key) then loc = 'u'
  elseif redis.call('ZSCORE', K_BACKOFF, key) then loc = 'b' end
  if loc then
    local s = get_state(key)
    remove_from_queue(key, loc, s)
    to_active(key, s)
    moved = moved + 1
  end
end
return moved
