-- Expired leases (expiry <= now): the pod goes back to active at its old place, counted as
-- a redispatch. Its next pop is a new attempt, so a late outcome of the old one is stale.
-- ARGV: now, limit. Returns the number of pods put back.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local due = redis.call('ZRANGEBYSCORE', K_INFLIGHT, '-inf', now, 'LIMIT', 0, limit)
if #due == 0 then return 0 end
local st = states(due)
local att = hmget(K_ATT, due)
local levels, st_pairs, att_pairs = {}, {}, {}
for i = 1, #due do
  local s = st[i]
  s[RED] = s[RED] + 1
  att_pairs[2 * i - 1] = due[i]; att_pairs[2 * i] = tonumber(att[i] or '0') + 1
  s[DIRTY] = 0
  st_pairs[2 * i - 1] = due[i]; st_pairs[2 * i] = cmsgpack.pack(s)
  local level = levels[s[PRIO]]
  if not level then level = {}; levels[s[PRIO]] = level end
  level[#level + 1] = s[TS]; level[#level + 1] = due[i]
end
bulk('ZREM', K_INFLIGHT, due, 1)
bulk('HSET', K_ST, st_pairs, 2)
bulk('HSET', K_ATT, att_pairs, 2) -- the expired attempt counts (SPEC A13: every pop does)
for prio, level in pairs(levels) do
  bulk('ZADD', active_key(prio), level, 2)
  redis.call('ZADD', K_PRIOS, -prio, prio)
end
stat('redispatched', #due)
return #due
