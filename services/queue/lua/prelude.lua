-- berth queue: the key slots and helpers every script starts with (prepended when loading).
-- KEYS order: services/queue/keys.py TENANT_KEYS (tests/queue/test_lua_keys.py checks the
-- names below against it). Times are integer microseconds.
--
-- Where a pod waits is the one sorted set holding it, member = pod key, or `cyc` in flight:
--   a:<prio>          active, one set per priority level, score = Timestamp (PrioritySort:
--                     levels from highest priority, then oldest Timestamp first)
--   backoff           score = backoff expiry          gated     score = Timestamp
--   u:<sig>|<prio>|<n> unschedulable, bucketed by failed-plugin signature, priority and
--                     Attempts (capped where the backoff reaches its maximum), score =
--                     Timestamp: a pod backs off until Timestamp + backoff(n), so one range
--                     query finds a bucket's pods still backing off.
-- A matching cluster event moves a whole bucket into a:<prio> with one ZUNIONSTORE (or a
-- RENAME when the level is empty).
--
-- Leases are per pop, not per pod: a pop opens cycles first..last and writes
--   cyc               pod key -> the scheduling cycle its pop opened; present iff in flight
--   lq:<first>        the pop's pod keys (a list: one cheap append per pod)
--   leases            member first:last, score = the pop's lease expiry
-- A pod's lease is its pop's, unless renewed (outcome 'extend'): then `ext` (score = its own
-- expiry) overrides it. A pop's lease expiring puts back the pods still leased by it (cycle
-- within first..last, not renewed); see expire.lua.
--
-- Per pod: `st` (cmsgpack state, fields below), `att` (Attempts of the attempts that ended;
-- the one in flight is att + 1, written when it ends, so a pop writes as little as possible),
-- `rq` (what a pop hands out: see request_blob, kept in step with `st` and `att`, so that a
-- pop never decodes a state). Pod bodies (`pod`, field key#rv), request blobs and failure
-- messages (`why`) never go through Lua on the hot paths (Python reads and writes them): Lua
-- 5.1 interns every string and hashes long ones sparsely, so many similar long strings would
-- make a script quadratic, and every string it touches costs.
local BASE, K_PRIOS, K_BACKOFF, K_GATED, K_LEASES = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local K_CTR, K_STATS, K_AFF, K_ST, K_ATT = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local K_CYC, K_POD, K_WHY, K_BUCKETS, K_RQ = KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15]
local K_EXT = KEYS[16]

-- State fields (services/queue/state.py mirrors them).
local UID, RV, PRIO, TS, ITS, PLG, NOM, SNN, RED, CFL, DIRTY, FP, SCHED, BKT =
  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14

-- Lua's unpack is limited to a few thousand values: bulk commands go in chunks.
local CHUNK = 4000

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


local function states(keys)
  local raw = hmget(K_ST, keys)
  for i = 1, #raw do
    if raw[i] then raw[i] = cmsgpack.unpack(raw[i]) end
  end
  return raw
end

local function attempts(key)
  return tonumber(redis.call('HGET', K_ATT, key) or '0')
end

-- Upstream calculateBackoffDuration: d = initial; for i = 1 .. attempts-1: if d > max - d then max else d += d.
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

local function stat(name, n)
  if n ~= 0 then redis.call('HINCRBY', K_STATS, name, n) end
end

local function active_key(prio) return BASE .. 'a:' .. prio end
local function bucket_key(bucket) return BASE .. 'u:' .. bucket end
local function body_field(key, rv) return key .. '#' .. rv end
local function lease_list(first) return BASE .. 'lq:' .. first end

-- A pod's next schedule request, as far as the queue state decides it (services/queue/
-- wire.py reads it): msgpack [body field (key#rv, in `pod`), map of 8 of the 12 request
-- fields]. Python adds tenant, cycle, lease and pod. `att`: the Attempts that ended (the next
-- pop is att + 1). One cmsgpack.pack of a table: every extra Lua string costs.
local function request_blob(key, s, att)
  return cmsgpack.pack({body_field(key, s[RV]), {
    uid = s[UID], key = key, attempt = att + 1, prio = s[PRIO], ts = s[TS] / 1e6,
    its = s[ITS] / 1e6, nnn = s[NOM], redispatches = s[RED], fp = s[FP],
    rv = s[RV],
  }})
end

-- Every state write goes through here (or writes `rq` itself, in bulk): `rq` follows `st`.
local function put_state(key, s, att)
  redis.call('HSET', K_ST, key, cmsgpack.pack(s))
  redis.call('HSET', K_RQ, key, request_blob(key, s, att))
end

-- Attempts beyond the one where the backoff reaches its maximum all back off alike.
local function attempts_class(att, init, max)
  local n = 1
  while n < att and backoff_us(n, init, max) < max do n = n + 1 end
  return n
end

local function bucket_backoff(bucket, init, max)
  return backoff_us(tonumber(string.match(bucket, '|(%d+)$')), init, max)
end

-- Where a known pod waits: a=active b=backoff u=unschedulable g=gated i=in flight.
local function locate(key, s)
  if redis.call('HEXISTS', K_CYC, key) == 1 then return 'i' end
  if redis.call('ZSCORE', active_key(s[PRIO]), key) then return 'a' end
  if redis.call('ZSCORE', K_BACKOFF, key) then return 'b' end
  if redis.call('ZSCORE', K_GATED, key) then return 'g' end
  if s[BKT] ~= '' and redis.call('ZSCORE', bucket_key(s[BKT]), key) then return 'u' end
  return false
end

-- A lease ended by something else than its attempt's outcome (expiry, delete): a pop reads
-- its pods' request blobs after its script and drops them if this happened meanwhile
-- (store.pop_raw), so a request never carries an attempt the pop did not lease.
local function leases_revoked()
  redis.call('HINCRBY', K_CTR, 'revoked', 1)
end

-- The attempt in flight ended (or the pod went): its lease goes. `lq:` lists keep the key
-- until their pop's lease expires; expire.lua ignores the pods no longer leased by it.
local function end_lease(key)
  redis.call('HDEL', K_CYC, key)
  redis.call('ZREM', K_EXT, key)
end

local function add_active(key, s)
  redis.call('ZADD', active_key(s[PRIO]), s[TS], key)
  redis.call('ZADD', K_PRIOS, -s[PRIO], s[PRIO])
end

local function park(key, s, att, init, max)
  local bucket = s[PLG] .. '|' .. s[PRIO] .. '|' .. attempts_class(att, init, max)
  redis.call('ZADD', bucket_key(bucket), s[TS], key)
  redis.call('SADD', K_BUCKETS, bucket)
  s[BKT] = bucket
end

local function unpark(key, s)
  local bucket = s[BKT]
  redis.call('ZREM', bucket_key(bucket), key)
  if redis.call('EXISTS', bucket_key(bucket)) == 0 then redis.call('SREM', K_BUCKETS, bucket) end
  s[BKT] = ''
end

local function remove_from_queue(key, loc, s)
  if loc == 'a' then redis.call('ZREM', active_key(s[PRIO]), key)
  elseif loc == 'b' then redis.call('ZREM', K_BACKOFF, key)
  elseif loc == 'u' then unpark(key, s)
  elseif loc == 'g' then redis.call('ZREM', K_GATED, key)
  elseif loc == 'i' then end_lease(key)
  end
end

-- Drop every trace of a pod; returns where it was (false if unknown).
local function forget(key, s)
  local loc = locate(key, s)
  if loc then remove_from_queue(key, loc, s) end
  redis.call('HDEL', K_POD, body_field(key, s[RV]))
  redis.call('HDEL', K_ST, key)
  redis.call('HDEL', K_ATT, key)
  redis.call('HDEL', K_CYC, key)
  redis.call('HDEL', K_RQ, key)
  redis.call('HDEL', K_WHY, key)
  redis.call('SREM', K_AFF, key)
  return loc or 'a'
end
