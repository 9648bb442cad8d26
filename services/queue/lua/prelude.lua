-- berth queue: the key slots and helpers every script starts with (prepended when loading).
-- KEYS order: services/queue/keys.py ALL. Times are integer microseconds.
local K_ACTIVE, K_BACKOFF, K_UNSCHED, K_GATED, K_INFLIGHT = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local K_CTR, K_STATS, K_AFF = KEYS[6], KEYS[7], KEYS[8]
local C_LOC, C_POD, C_UID, C_RV, C_PRIO = KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local C_TS, C_ITS, C_ATT, C_CYC, C_AM = KEYS[14], KEYS[15], KEYS[16], KEYS[17], KEYS[18]
local C_PLG, C_WHY, C_NOM, C_SNN, C_RED = KEYS[19], KEYS[20], KEYS[21], KEYS[22], KEYS[23]
local C_CFL, C_DIRTY, C_FP, C_SCHED = KEYS[24], KEYS[25], KEYS[26], KEYS[27]
local COLUMNS = {C_LOC, C_POD, C_UID, C_RV, C_PRIO, C_TS, C_ITS, C_ATT, C_CYC, C_AM, C_PLG,
  C_WHY, C_NOM, C_SNN, C_RED, C_CFL, C_DIRTY, C_FP, C_SCHED}

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

local function active_member(ts, seq, key)
  return string.format('%016d%012d', ts, seq) .. key
end

local function stat(name, n)
  if n ~= 0 then redis.call('HINCRBY', K_STATS, name, n) end
end

local function remove_from_queue(key, loc)
  if loc == 'a' then
    local am = redis.call('HGET', C_AM, key)
    if am then redis.call('ZREM', K_ACTIVE, am) end
  elseif loc == 'b' then redis.call('ZREM', K_BACKOFF, key)
  elseif loc == 'u' then redis.call('ZREM', K_UNSCHED, key)
  elseif loc == 'g' then redis.call('ZREM', K_GATED, key)
  elseif loc == 'i' then redis.call('ZREM', K_INFLIGHT, key)
  end
end

-- Drop every trace of a pod; returns where it was (false if unknown).
local function forget(key)
  local loc = redis.call('HGET', C_LOC, key)
  if not loc then return false end
  remove_from_queue(key, loc)
  for _, col in ipairs(COLUMNS) do redis.call('HDEL', col, key) end
  redis.call('SREM', K_AFF, key)
  return loc
end

local function to_active(key)
  local prio = tonumber(redis.call('HGET', C_PRIO, key))
  redis.call('ZADD', K_ACTIVE, -prio, redis.call('HGET', C_AM, key))
  redis.call('HSET', C_LOC, key, 'a')
end
