-- flushBackoffQCompleted: pods whose backoff expired (expiry <= now) go to active.
-- ARGV: now, limit. Returns the number moved.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local due = redis.call('ZRANGEBYSCORE', K_BACKOFF, '-inf', now, 'LIMIT', 0, limit)
if #due == 0 then return 0 end
local st = states(due)
local levels = {}
for i = 1, #due do
  local s = st[i]
  local level = levels[s[PRIO]]
  if not level then level = {}; levels[s[PRIO]] = level end
  level[#level + 1] = s[TS]; level[#level + 1] = due[i]
end
bulk('ZREM', K_BACKOFF, due, 1)
for prio, level in pairs(levels) do
  bulk('ZADD', active_key(prio), level, 2)
  redis.call('ZADD', K_PRIOS, -prio, prio)
end
return #due
