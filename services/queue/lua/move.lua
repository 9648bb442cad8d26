-- MoveAllToActiveOrBackoffQueue, the unschedulable-leftover flush and the assigned-pod
-- variants (AssignedPodAdded/Updated: a preCheck's chosen keys).
-- ARGV: now, initial_backoff, max_backoff, mode, plugins, then for mode 'keys' the pod keys.
--   mode 'all': every unschedulable pod; 'keys': only the given ones (if unschedulable);
--   'leftover:<cutoff>': pods parked strictly before cutoff (now - Timestamp > max duration).
--   plugins: '*' (a wildcard event) or the event's plugins, comma-separated.
-- Returns {moved to active, moved to backoff, left in place}.
local now, init, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local mode, plugins = ARGV[4], ARGV[5]

local wildcard = plugins == '*'
local wanted = {}
for name in string.gmatch(plugins, '[^,]+') do wanted[name] = true end

-- podMatchesEvent: a pod moves when one of its failed plugins is registered for the event, or when it
-- has none (an error, or a failure outside PreFilter/Filter/Permit).
local function matches(sig)
  if wildcard or sig == '' then return true end
  for name in string.gmatch(sig, '[^,]+') do
    if wanted[name] then return true end
  end
  return false
end

local function parts(bucket)
  local sig, prio = string.match(bucket, '^(.*)|([^|]*)|%d+$')
  return sig, tonumber(prio)
end

local to_active, to_backoff, kept = 0, 0, 0

local function activate_level(prio)
  redis.call('ZADD', K_PRIOS, -prio, prio)
end

-- A pod that leaves a bucket keeps its old BKT in `st`: harmless, since locate() checks the
-- bucket's membership, and the next park overwrites it.

-- movePodsToActiveOrBackoffQueue for listed pods of one bucket: still backing off -> backoffQ, else activeQ.
local function move_some(bucket, keys)
  local _, prio = parts(bucket)
  local u = bucket_key(bucket)
  local b = bucket_backoff(bucket, init, max)
  local tss = {}
  for i = 1, #keys, CHUNK do
    local part = redis.call('ZMSCORE', u, unpack(keys, i, math.min(i + CHUNK - 1, #keys)))
    for k = 1, #part do tss[i + k - 1] = part[k] end
  end
  local active, backoff = {}, {}
  for i = 1, #keys do
    local ts = tonumber(tss[i])
    if ts + b > now then
      backoff[#backoff + 1] = ts + b; backoff[#backoff + 1] = keys[i]
    else
      active[#active + 1] = tss[i]; active[#active + 1] = keys[i]
    end
  end
  bulk('ZREM', u, keys, 1)
  bulk('ZADD', K_BACKOFF, backoff, 2)
  if #active > 0 then
    bulk('ZADD', active_key(prio), active, 2)
    activate_level(prio)
  end
  if redis.call('EXISTS', u) == 0 then redis.call('SREM', K_BUCKETS, bucket) end
  to_active = to_active + #active / 2
  to_backoff = to_backoff + #backoff / 2
end

-- A whole bucket: the pods still backing off one by one, the rest with one union.
local function move_bucket(bucket)
  local _, prio = parts(bucket)
  local u = bucket_key(bucket)
  local b = bucket_backoff(bucket, init, max)
  local backing = redis.call('ZRANGEBYSCORE', u, '(' .. string.format('%.0f', now - b), '+inf',
    'WITHSCORES')
  if #backing > 0 then
    local keys, backoff = {}, {}
    for i = 1, #backing, 2 do
      keys[#keys + 1] = backing[i]
      backoff[#backoff + 1] = tonumber(backing[i + 1]) + b; backoff[#backoff + 1] = backing[i]
    end
    bulk('ZREM', u, keys, 1)
    bulk('ZADD', K_BACKOFF, backoff, 2)
    to_backoff = to_backoff + #keys
  end
  local n = redis.call('ZCARD', u)
  if n > 0 then
    local level = active_key(prio)
    local m = redis.call('ZCARD', level)
    if m == 0 then
      -- The bucket becomes the level: O(1) however many pods wake (same slot: {tenant}).
      redis.call('RENAME', u, level)
    elseif n * 4 >= m then
      redis.call('ZUNIONSTORE', level, 2, level, u)
    else
      local members = redis.call('ZRANGE', u, 0, -1, 'WITHSCORES')
      local pairs_ = {}
      for i = 1, #members, 2 do
        pairs_[#pairs_ + 1] = members[i + 1]; pairs_[#pairs_ + 1] = members[i]
      end
      bulk('ZADD', level, pairs_, 2)
    end
    activate_level(prio)
    to_active = to_active + n
  end
  redis.call('DEL', u)
  redis.call('SREM', K_BUCKETS, bucket)
end

local buckets = redis.call('SMEMBERS', K_BUCKETS)
if mode == 'all' then
  for _, bucket in ipairs(buckets) do
    if matches(parts(bucket)) then
      move_bucket(bucket)
    else
      kept = kept + redis.call('ZCARD', bucket_key(bucket))
    end
  end
elseif mode == 'keys' then
  local by_bucket = {}
  local keys = {}
  for i = 6, #ARGV do keys[#keys + 1] = ARGV[i] end
  local st = states(keys)
  for i = 1, #keys do
    local s = st[i]
    if s and s[BKT] ~= '' and redis.call('ZSCORE', bucket_key(s[BKT]), keys[i]) then
      if matches(s[PLG]) then
        by_bucket[s[BKT]] = by_bucket[s[BKT]] or {}
        table.insert(by_bucket[s[BKT]], keys[i])
      else
        kept = kept + 1
      end
    end
  end
  for bucket, list in pairs(by_bucket) do move_some(bucket, list) end
else
  local cutoff = string.sub(mode, 10)
  local any = false
  for _, bucket in ipairs(buckets) do
    local due = redis.call('ZRANGEBYSCORE', bucket_key(bucket), '-inf', '(' .. cutoff)
    if #due > 0 then
      any = true
      move_some(bucket, due)
    end
  end
  -- upstream calls movePodsToActiveOrBackoffQueue (which sets moveRequestCycle) only when
  -- some pod is left over.
  if not any then return {0, 0, 0} end
end
-- moveRequestCycle = schedulingCycle: always, even when nothing moved.
redis.call('HSET', K_CTR, 'mrc', scheduling_cycle())
stat('woken', to_active + to_backoff)
return {to_active, to_backoff, kept}
