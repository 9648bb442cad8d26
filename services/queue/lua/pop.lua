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
local att = hmget(C_ATT, keys)
local first_cycle = redis.call('HINCRBY', K_CTR, 'scycle', k) - k + 1
local expiry = now + lease
local att_pairs, cyc_pairs, loc_pairs, leases = {}, {}, {}, {}
for i = 1, k do
  local key = keys[i]
  att[i] = tonumber(att[i]) + 1
  att_pairs[2 * i - 1] = key; att_pairs[2 * i] = att[i]
  cyc_pairs[2 * i - 1] = key; cyc_pairs[2 * i] = first_cycle + i - 1
  loc_pairs[2 * i - 1] = key; loc_pairs[2 * i] = 'i'
  leases[2 * i - 1] = expiry; leases[2 * i] = key
end
bulk('HSET', C_ATT, att_pairs, 2)
bulk('HSET', C_CYC, cyc_pairs, 2)
bulk('HSET', C_LOC, loc_pairs, 2)
bulk('ZADD', K_INFLIGHT, leases, 2)
bulk('HDEL', C_DIRTY, keys, 1)

local uid, prio, ts = hmget(C_UID, keys), hmget(C_PRIO, keys), hmget(C_TS, keys)
local its, nom, red, body = hmget(C_ITS, keys), hmget(C_NOM, keys), hmget(C_RED, keys), hmget(C_POD, keys)
local out = {}
for i = 1, k do
  local b = (i - 1) * 10
  out[b + 1] = keys[i]; out[b + 2] = uid[i]; out[b + 3] = att[i]; out[b + 4] = first_cycle + i - 1
  out[b + 5] = prio[i]; out[b + 6] = ts[i]; out[b + 7] = its[i]; out[b + 8] = nom[i] or ''
  out[b + 9] = red[i] or '0'; out[b + 10] = body[i]
end
stat('dispatched', k)
return out
