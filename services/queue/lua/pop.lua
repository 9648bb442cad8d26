-- Pop (SPEC A13/A14) with a lease: the head of active, at most n, within the in-flight cap.
-- ARGV: now, n, cap (0: none), lease_us.
-- Returns 10 values per pod: key, attempts, scheduling cycle, priority, Timestamp, uid,
-- InitialAttemptTimestamp, nominated node, redispatches, resourceVersion (of the body).
local now, n, cap, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local room = n
if cap > 0 then room = math.min(n, cap - redis.call('ZCARD', K_INFLIGHT)) end
if room <= 0 then return {} end

local keys, prios, tss = {}, {}, {}
for _, prio in ipairs(redis.call('ZRANGE', K_PRIOS, 0, -1)) do
  local level = active_key(prio)
  local popped = redis.call('ZPOPMIN', level, room)
  for i = 1, #popped, 2 do
    keys[#keys + 1] = popped[i]; prios[#prios + 1] = tonumber(prio); tss[#tss + 1] = tonumber(popped[i + 1])
  end
  if redis.call('EXISTS', level) == 0 then redis.call('ZREM', K_PRIOS, prio) end
  room = room - #popped / 2
  if room <= 0 then break end
end
local k = #keys
if k == 0 then return {} end

-- The attempt in flight is att + 1; `att` itself is written when the attempt ends.
local att = hmget(K_ATT, keys)
local st = states(keys)
local first_cycle = redis.call('HINCRBY', K_CTR, 'scycle', k) - k + 1
local expiry = now + lease
local cyc_pairs, leases, out = {}, {}, {}
for i = 1, k do
  local key = keys[i]
  local a = tonumber(att[i] or '0') + 1
  cyc_pairs[2 * i - 1] = key; cyc_pairs[2 * i] = first_cycle + i - 1
  leases[2 * i - 1] = expiry; leases[2 * i] = key
  local s = st[i]
  local b = (i - 1) * 10
  out[b + 1] = key; out[b + 2] = a; out[b + 3] = first_cycle + i - 1
  out[b + 4] = prios[i]; out[b + 5] = tss[i]; out[b + 6] = s[UID]; out[b + 7] = s[ITS]
  out[b + 8] = s[NOM]; out[b + 9] = s[RED]; out[b + 10] = s[RV]
end
bulk('HSET', K_CYC, cyc_pairs, 2)
bulk('ZADD', K_INFLIGHT, leases, 2)
stat('dispatched', k)
return out
