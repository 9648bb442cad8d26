-- Expired leases (expiry <= now): the pod goes back to active at its old place, counted as
-- a redispatch. Its next pop is a new attempt, so a late outcome of the old one is stale.
-- ARGV: now, limit. Returns the number of pods put back.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local due = redis.call('ZRANGEBYSCORE', K_INFLIGHT, '-inf', now, 'LIMIT', 0, limit)
if #due == 0 then return 0 end
local st = states(due)
local active, st_pairs = {}, {}
for i = 1, #due do
  local s = st[i]
  s[RED] = s[RED] + 1
  s[DIRTY] = 0
  push_active(active, s, due[i])
  st_pairs[2 * i - 1] = due[i]; st_pairs[2 * i] = cmsgpack.pack(s)
end
bulk('ZREM', K_INFLIGHT, due, 1)
bulk('ZADD', K_ACTIVE, active, 2)
bulk('HSET', K_ST, st_pairs, 2)
stat('redispatched', #due)
return #due
