-- flushBackoffQCompleted (SPEC A32): pods whose backoff expired (expiry <= now) go to active.
-- ARGV: now, limit. Returns the number moved.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local due = redis.call('ZRANGEBYSCORE', K_BACKOFF, '-inf', now, 'LIMIT', 0, limit)
if #due == 0 then return 0 end
local st = states(due)
local active = {}
for i = 1, #due do push_active(active, st[i], due[i]) end
bulk('ZREM', K_BACKOFF, due, 1)
bulk('ZADD', K_ACTIVE, active, 2)
return #due
