-- flushBackoffQCompleted (SPEC A32): pods whose backoff expired (expiry <= now) go to active.
-- ARGV: now, limit. Returns the number moved.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local due = redis.call('ZRANGEBYSCORE', K_BACKOFF, '-inf', now, 'LIMIT', 0, limit)
if #due == 0 then return 0 end
local am, prio = hmget(C_AM, due), hmget(C_PRIO, due)
local active, locs = {}, {}
for i = 1, #due do
  active[2 * i - 1] = -tonumber(prio[i]); active[2 * i] = am[i]
  locs[2 * i - 1] = due[i]; locs[2 * i] = 'a'
end
bulk('ZREM', K_BACKOFF, due, 1)
bulk('ZADD', K_ACTIVE, active, 2)
bulk('HSET', C_LOC, locs, 2)
return #due
