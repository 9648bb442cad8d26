-- Expired leases (expiry <= now): the pod goes back to active at its old place, counted as
-- a redispatch. Its next pop is a new attempt, so a late outcome of the old one is stale.
-- ARGV: now, limit. Returns the number of pods put back.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local due = redis.call('ZRANGEBYSCORE', K_INFLIGHT, '-inf', now, 'LIMIT', 0, limit)
if #due == 0 then return 0 end
local am, prio, red = hmget(C_AM, due), hmget(C_PRIO, due), hmget(C_RED, due)
local active, locs, reds = {}, {}, {}
for i = 1, #due do
  active[2 * i - 1] = -tonumber(prio[i]); active[2 * i] = am[i]
  locs[2 * i - 1] = due[i]; locs[2 * i] = 'a'
  reds[2 * i - 1] = due[i]; reds[2 * i] = tonumber(red[i] or '0') + 1
end
bulk('ZREM', K_INFLIGHT, due, 1)
bulk('ZADD', K_ACTIVE, active, 2)
bulk('HSET', C_LOC, locs, 2)
bulk('HSET', C_RED, reds, 2)
bulk('HDEL', C_DIRTY, due, 1)
stat('redispatched', #due)
return #due
