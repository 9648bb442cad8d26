-- Add (SPEC A9/A10) and Update (A15-A17) of a batch of pods (keys unique within a batch).
-- ARGV: now, initial_backoff, max_backoff, count, then per pod 12 fields:
--   op, key, uid, rv, prio, gated ('1' or ''), status nominatedNodeName, fingerprint,
--   has required pod affinity ('1' or ''), schedulerName, why (gated message) , pod body
-- An add of a pod the queue already holds (same uid) is an update: Kafka delivers at least
-- once. Returns, per pod, where it is now, or '' when the event was stale and ignored.
local now, init, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local count = tonumber(ARGV[4])
local F = 12
local GATES = 'SchedulingGates'

local seq = next_seq(count)
local result = {}
local new = {loc = {}, pod = {}, uid = {}, rv = {}, prio = {}, ts = {}, att = {}, am = {},
  snn = {}, fp = {}, sched = {}, plg = {}, why = {}, nom = {}, active = {}, gated = {}, aff = {}}
local added, updated, ignored = 0, 0, 0

local function push(list, ...)
  for _, v in ipairs({...}) do list[#list + 1] = v end
end

local function insert(key, uid, rv, prio, gated, snn, fp, aff, sched, why, body)
  local am = active_member(now, seq, key)
  seq = seq + 1
  push(new.pod, key, body); push(new.uid, key, uid); push(new.rv, key, rv)
  push(new.prio, key, prio); push(new.ts, key, now); push(new.att, key, 0)
  push(new.am, key, am); push(new.snn, key, snn); push(new.fp, key, fp); push(new.sched, key, sched)
  if snn ~= '' then push(new.nom, key, snn) end
  if aff then push(new.aff, key) end
  if gated then
    push(new.loc, key, 'g'); push(new.gated, now, key)
    push(new.plg, key, GATES); push(new.why, key, why)
    return 'g'
  end
  push(new.loc, key, 'a'); push(new.active, -prio, am)
  return 'a'
end

local function update(key, loc, uid, rv, prio, gated, snn, fp, aff, sched, why, body)
  local stored_rv = tonumber(redis.call('HGET', C_RV, key) or '0')
  if rv > 0 and stored_rv > 0 and rv < stored_rv then return '' end
  local changed = redis.call('HGET', C_FP, key) ~= fp
  local old_prio = tonumber(redis.call('HGET', C_PRIO, key))
  redis.call('HSET', C_POD, key, body)
  redis.call('HSET', C_RV, key, rv)
  redis.call('HSET', C_FP, key, fp)
  redis.call('HSET', C_PRIO, key, prio)
  redis.call('HSET', C_SCHED, key, sched)
  -- Nominator (upstream UpdateNominatedPod): a nomination the scheduler made is kept while
  -- neither the old nor the new object carries one in its status.
  local old_snn = redis.call('HGET', C_SNN, key) or ''
  redis.call('HSET', C_SNN, key, snn)
  if old_snn ~= '' or snn ~= '' then
    if snn == '' then redis.call('HDEL', C_NOM, key) else redis.call('HSET', C_NOM, key, snn) end
  end
  if aff then redis.call('SADD', K_AFF, key) else redis.call('SREM', K_AFF, key) end

  if loc == 'a' then
    -- In place; a new priority re-sorts it.
    if prio ~= old_prio then
      redis.call('ZADD', K_ACTIVE, -prio, redis.call('HGET', C_AM, key))
    end
    return 'a'
  elseif loc == 'b' then
    return 'b' -- in place inside backoffQ (SPEC A15, decision 6)
  elseif loc == 'i' then
    -- Never dispatched twice while leased: remember the change for the outcome instead.
    if changed then redis.call('HSET', C_DIRTY, key, '1') end
    return 'i'
  end
  -- unschedulablePods, gated or not (A16).
  if not changed then return loc end
  if loc == 'g' and gated then
    redis.call('HSET', C_WHY, key, why)
    return 'g'
  end
  if loc == 'u' then
    local exp = tonumber(redis.call('HGET', C_TS, key))
      + backoff_us(tonumber(redis.call('HGET', C_ATT, key)), init, max)
    if exp > now then -- still backing off (isPodBackingoff is never true for gated pods)
      redis.call('ZREM', K_UNSCHED, key)
      redis.call('ZADD', K_BACKOFF, exp, key)
      redis.call('HSET', C_LOC, key, 'b')
      return 'b'
    end
  end
  -- addToActiveQ: PreEnqueue (scheduling gates) again.
  if gated then
    remove_from_queue(key, loc)
    redis.call('ZADD', K_GATED, redis.call('HGET', C_TS, key), key)
    redis.call('HSET', C_LOC, key, 'g')
    redis.call('HSET', C_PLG, key, GATES)
    redis.call('HSET', C_WHY, key, why)
    return 'g'
  end
  remove_from_queue(key, loc)
  if loc == 'g' then
    redis.call('HDEL', C_PLG, key)
    redis.call('HDEL', C_WHY, key)
  end
  to_active(key)
  return 'a'
end

local locs = {}
for i = 1, count do locs[i] = ARGV[4 + (i - 1) * F + 2] end
locs = hmget(C_LOC, locs)

for i = 1, count do
  local b = 4 + (i - 1) * F
  local key, uid, rv = ARGV[b + 2], ARGV[b + 3], tonumber(ARGV[b + 4])
  local prio, gated = tonumber(ARGV[b + 5]), ARGV[b + 6] == '1'
  local snn, fp, aff = ARGV[b + 7], ARGV[b + 8], ARGV[b + 9] == '1'
  local sched, why, body = ARGV[b + 10], ARGV[b + 11], ARGV[b + 12]
  local loc = locs[i]
  if loc and redis.call('HGET', C_UID, key) ~= uid then
    forget(key) -- a new pod with the same name: the old one is gone
    loc = false
  end
  if loc then
    local r = update(key, loc, uid, rv, prio, gated, snn, fp, aff, sched, why, body)
    if r == '' then ignored = ignored + 1 else updated = updated + 1 end
    result[i] = r
  else
    result[i] = insert(key, uid, rv, prio, gated, snn, fp, aff, sched, why, body)
    added = added + 1
  end
end

bulk('HSET', C_LOC, new.loc, 2); bulk('HSET', C_POD, new.pod, 2); bulk('HSET', C_UID, new.uid, 2)
bulk('HSET', C_RV, new.rv, 2); bulk('HSET', C_PRIO, new.prio, 2); bulk('HSET', C_TS, new.ts, 2)
bulk('HSET', C_ITS, new.ts, 2); bulk('HSET', C_ATT, new.att, 2); bulk('HSET', C_AM, new.am, 2)
bulk('HSET', C_SNN, new.snn, 2); bulk('HSET', C_FP, new.fp, 2); bulk('HSET', C_SCHED, new.sched, 2)
bulk('HSET', C_PLG, new.plg, 2); bulk('HSET', C_WHY, new.why, 2); bulk('HSET', C_NOM, new.nom, 2)
bulk('SADD', K_AFF, new.aff, 1)
bulk('ZADD', K_ACTIVE, new.active, 2); bulk('ZADD', K_GATED, new.gated, 2)
stat('added', added); stat('updated', updated); stat('stale_events', ignored)
return result
