-- Pop (SPEC A13/A14) with a lease: the head of active, at most n, within the in-flight cap.
-- ARGV: now, n, cap (0: none), lease_us.
-- Returns 10 values per pod: key, uid, attempts, cycle, prio, ts, its, nominated, redispatches, body
local now, n, cap, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local room = n
if cap > 0 then room = math.min(n, cap - redis.call('ZCARD', K_INFLIGHT)) end
if room <= 0 then return {} end
local popped = redis.call('ZPOPMIN', K_ACTIVE, room)
local k = #popped / 2
if k == 0 then return {} end

local keys = {}
for i = 1, k do keys[i] = string.sub(popped[2 * i - 1], AM_PREFIX + 1) end
local st = states(keys)
local body = hmget(K_POD, keys)
local first_cycle = redis.call('HINCRBY', K_CTR, 'scycle', k) - k + 1
local expiry = now + lease
local st_pairs, leases, out = {}, {}, {}
for i = 1, k do
  local key, s = keys[i], st[i]
  s[ATT] = s[ATT] + 1
  s[CYC] = first_cycle + i - 1
  s[DIRTY] = 0
  st_pairs[2 * i - 1] = key; st_pairs[2 * i] = cmsgpack.pack(s)
  leases[2 * i - 1] = expiry; leases[2 * i] = key
  local b = (i - 1) * 10
  out[b + 1] = key; out[b + 2] = s[UID]; out[b + 3] = s[ATT]; out[b + 4] = s[CYC]
  out[b + 5] = s[PRIO]; out[b + 6] = s[TS]; out[b + 7] = s[ITS]; out[b + 8] = s[NOM]
  out[b + 9] = s[RED]; out[b + 10] = body[i]
end
bulk('HSET', K_ST, st_pairs, 2)
bulk('ZADD', K_INFLIGHT, leases, 2)
stat('dispatched', k)
return out
