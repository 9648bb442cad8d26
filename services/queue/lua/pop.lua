-- Pop (upstream PriorityQueue.Pop) with a lease: the head of active, at most n, within the in-flight cap.
-- ARGV: now, n, cap (0: none), lease_us.
-- Returns {} or: the scheduling cycle of the first pod popped, the `revoked` counter (see
-- leases_revoked), then the pod keys in pop order (the i-th opened cycle first + i - 1). The
-- caller reads their `rq` blobs and bodies: a pop writes two cheap entries per pod (`cyc`,
-- `lq:`) and one lease for all of them.
local now, n, cap, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local room = n
if cap > 0 then room = math.min(n, cap - redis.call('HLEN', K_CYC)) end
if room <= 0 then return {} end

-- ZRANGE + ZREMRANGEBYRANK: the ZPOPMIN order without formatting a score per pod.
local out = {0, counter('revoked', 0)}
for _, prio in ipairs(redis.call('ZRANGE', K_PRIOS, 0, -1)) do
  local level = active_key(prio)
  local head = redis.call('ZRANGE', level, 0, room - 1)
  if #head > 0 then
    redis.call('ZREMRANGEBYRANK', level, 0, #head - 1)
    for i = 1, #head do out[#out + 1] = head[i] end
  end
  if redis.call('EXISTS', level) == 0 then redis.call('ZREM', K_PRIOS, prio) end
  room = room - #head
  if room <= 0 then break end
end
local k = #out - 2
if k == 0 then return {} end

local first = redis.call('HINCRBY', K_CTR, 'scycle', k) - k + 1
local last = first + k - 1
local cyc_pairs = {}
for i = 1, k do
  cyc_pairs[2 * i - 1] = out[i + 2]; cyc_pairs[2 * i] = first + i - 1
end
bulk('HSET', K_CYC, cyc_pairs, 2)
local list = lease_list(first)
for i = 3, k + 2, CHUNK do
  redis.call('RPUSH', list, unpack(out, i, math.min(i + CHUNK - 1, k + 2)))
end
redis.call('ZADD', K_LEASES, now + lease, first .. ':' .. last)
stat('dispatched', k)
out[1] = first
return out
