-- berth queue: the key slots and helpers every script starts with (prepended when loading).
-- KEYS order: services/queue/keys.py ALL. Times are integer microseconds.
--
-- A pod's state is one cmsgpack array in the `st` hash (fields below); its object is in `pod`,
-- its last failure in `why`. Where it waits is the one sorted set that holds it (active by
-- member, the others by key), so moving a pod touches two sorted sets and nothing else.
local K_ACTIVE, K_BACKOFF, K_UNSCHED, K_GATED, K_INFLIGHT = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local K_CTR, K_STATS, K_AFF = KEYS[6], KEYS[7], KEYS[8]
local K_ST, K_POD, K_WHY = KEYS[9], KEYS[10], KEYS[11]

-- State fields (services/queue/state.py mirrors them).
local UID, RV, PRIO, TS, ITS, ATT, CYC, SEQ = 1, 2, 3, 4, 5, 6, 7, 8
local PLG, NOM, SNN, RED, CFL, DIRTY, FP, SCHED = 9, 10, 11, 12, 13, 14, 15, 16

-- Lua's unpack is limited to a few thousand values: bulk commands go in chunks.
local CHUNK = 4000
-- Active members: 16-digit timestamp, 12-digit sequence, then the pod key.
local AM_PREFIX = 28

local function bulk(cmd, key, list, arity)
  local n = #list
  if n == 0 then return end
  local step = CHUNK - (CHUNK % arity)
  for i = 1, n, step do
    redis.call(cmd, key, unpack(list, i, math.min(i + step - 1, n)))
  end
end

local function hmget(col, keys)
  local out = {}
  local n = #keys
  for i = 1, n, CHUNK do
    local part = redis.call('HMGET', col, unpack(keys, i, math.min(i + CHUNK - 1, n)))
    for k = 1, #part do out[i + k - 1] = part[k] end
  end
  return out
end

local function get_state(key)
  local raw = redis.call('HGET', K_ST, key)
  if raw then return cmsgpack.unpack(raw) end
  return nil
end

local function put_state(key, s)
  redis.call('HSET', K_ST, key, cmsgpack.pack(s))
end

local function states(keys)
  local raw = hmget(K_ST, keys)
  for i = 1, #raw do
    if raw[i] then raw[i] = cmsgpack.unpack(raw[i]) end
  end
  return raw
end

-- SPEC A28: d = initial; for i = 1 .. attempts-1: if d > max - d then max else d += d.
local function backoff_us(att, init, max)
  local d = init
  for _ = 2, att do
    if d > max - d then return max end
    d = d + d
  end
  return d
end

local function counter(name, default)
  local v = redis.call('HGET', K_CTR, name)
  if v then return tonumber(v) end
  return default
end

local function scheduling_cycle() return counter('scycle', 0) end
local function move_request_cycle() return counter('mrc', -1) end

-- Reserve n sequence numbers; returns the first.
local function next_seq(n)
  return redis.call('HINCRBY', K_CTR, 'seq', n) - n + 1
end

-- PrioritySort (SPEC A38): score -priority, then Timestamp, then arrival sequence.
local function active_member(s, key)
  return string.format('%016d%012d', s[TS], s[SEQ]) .. key
end

local function push_active(list, s, key)
  list[#list + 1] = -s[PRIO]
  list[#list + 1] = active_member(s, key)
end

local function stat(name, n)
  if n ~= 0 then redis.call('HINCRBY', K_STATS, name, n) end
end

-- Where a known pod waits: a=active b=backoff u=unschedulable g=gated i=in flight.
local function locate(key)
  if redis.call('ZSCORE', K_INFLIGHT, key) then return 'i' end
  if redis.call('ZSCORE', K_BACKOFF, key) then return 'b' end
  if redis.call('ZSCORE', K_UNSCHED, key) then return 'u' end
  if redis.call('ZSCORE', K_GATED, key) then return 'g' end
  return 'a'
end

local function remove_from_queue(key, loc, s)
  if loc == 'a' then redis.call('ZREM', K_ACTIVE, active_member(s, key))
  elseif loc == 'b' then redis.call('ZREM', K_BACKOFF, key)
  elseif loc == 'u' then redis.call('ZREM', K_UNSCHED, key)
  elseif loc == 'g' then redis.call('ZREM', K_GATED, key)
  elseif loc == 'i' then redis.call('ZREM', K_INFLIGHT, key)
  end
end

-- Drop every trace of a pod; returns where it was (false if unknown).
local function forget(key)
  local s = get_state(key)
  if not s then return false end
  local loc = locate(key)
  remove_from_queue(key, loc, s)
  redis.call('HDEL', K_ST, key)
  redis.call('HDEL', K_POD, key)
  redis.call('HDEL', K_WHY, key)
  redis.call('SREM', K_AFF, key)
  return loc
end

local function to_active(key, s)
  redis.call('ZADD', K_ACTIVE, -s[PRIO], active_member(s, key))
end
