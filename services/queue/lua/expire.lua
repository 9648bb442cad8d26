-- Expired leases (expiry <= now): the pod goes back to active at its old place, counted as
-- a redispatch. Its next pop is a new attempt, so a late outcome of the old one is stale.
-- A pop's lease (`leases`) covers its pods still leased by it: cycle within first..last
-- (an ended attempt removed the pod from `cyc`; a later pop gave it a later cycle) and not
-- renewed (`ext`, which expires on its own).
-- ARGV: now, limit (whole pops are taken until about `limit` pods are due).
-- Returns the number of pods put back.
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local due = {}

local function zmscore(key, members)
  local out = {}
  for i = 1, #members, CHUNK do
    local part = redis.call('ZMSCORE', key, unpack(members, i, math.min(i + CHUNK - 1, #members)))
    for k = 1, #part do out[i + k - 1] = part[k] end
  end
  return out
end

for _, lease in ipairs(redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', now)) do
  if #due >= limit then break end
  local first, last = string.match(lease, '^(%d+):(%d+)$')
  first, last = tonumber(first), tonumber(last)
  local list = lease_list(first)
  local keys = redis.call('LRANGE', list, 0, -1)
  if #keys > 0 then
    local cycles = hmget(K_CYC, keys)
    local renewed = zmscore(K_EXT, keys)
    for i = 1, #keys do
      local c = cycles[i] and tonumber(cycles[i])
      if c and c >= first and c <= last and not renewed[i] then due[#due + 1] = keys[i] end
    end
  end
  redis.call('DEL', list)
  redis.call('ZREM', K_LEASES, lease)
end
local renewed = redis.call('ZRANGEBYSCORE', K_EXT, '-inf', now, 'LIMIT', 0, math.max(limit - #due, 0))
for i = 1, #renewed do due[#due + 1] = renewed[i] end -- in flight: `ext` goes with the lease
if #due == 0 then return 0 end

local st = states(due)
local att = hmget(K_ATT, due)
local levels, st_pairs, att_pairs, rq_pairs = {}, {}, {}, {}
for i = 1, #due do
  local s = st[i]
  local a = tonumber(att[i] or '0') + 1
  s[RED] = s[RED] + 1
  att_pairs[2 * i - 1] = due[i]; att_pairs[2 * i] = a
  s[DIRTY] = 0
  st_pairs[2 * i - 1] = due[i]; st_pairs[2 * i] = cmsgpack.pack(s)
  rq_pairs[2 * i - 1] = due[i]; rq_pairs[2 * i] = request_blob(due[i], s, a)
  local level = levels[s[PRIO]]
  if not level then level = {}; levels[s[PRIO]] = level end
  level[#level + 1] = s[TS]; level[#level + 1] = due[i]
end
bulk('HDEL', K_CYC, due, 1)
bulk('ZREM', K_EXT, renewed, 1)
bulk('HSET', K_ST, st_pairs, 2)
bulk('HSET', K_RQ, rq_pairs, 2)
bulk('HSET', K_ATT, att_pairs, 2) -- the expired attempt counts (every pop does)
for prio, level in pairs(levels) do
  bulk('ZADD', active_key(prio), level, 2)
  redis.call('ZADD', K_PRIOS, -prio, prio)
end
leases_revoked()
stat('redispatched', #due)
return #due
