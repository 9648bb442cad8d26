-- Add and Update (upstream PriorityQueue.Add/Update) of a batch of pods (keys unique within a batch).
-- The caller has already stored each body at `pod` field key#rv; this script drops the
-- bodies it does not keep.
-- ARGV: now, initial_backoff, max_backoff, count, then per pod 10 fields:
--   op, key, uid, rv, prio, gated ('1' or ''), status nominatedNodeName, fingerprint,
--   has required pod affinity ('1' or ''), schedulerName
-- An add of a pod the queue already holds (same uid) is an update: Kafka delivers at least
-- once. Returns, per pod, where it is now (a/b/u/g/i), or '' when the event was stale.
-- New pods of one batch get Timestamps now, now+1us, ... so they pop in arrival order.
local now, init, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local count = tonumber(ARGV[4])
local F = 10
local GATES = 'SchedulingGates'

local result = {}
local new_st, new_rq, new_aff, new_gated, new_active = {}, {}, {}, {}, {}
local added, updated, ignored = 0, 0, 0

local function insert(i, key, uid, rv, prio, gated, snn, fp, aff, sched)
  local ts = now + i - 1
  local plg = ''
  if gated then plg = GATES end
  local s = {uid, rv, prio, ts, ts, plg, snn, snn, 0, 0, 0, fp, sched, ''}
  new_st[#new_st + 1] = key; new_st[#new_st + 1] = cmsgpack.pack(s)
  new_rq[#new_rq + 1] = key; new_rq[#new_rq + 1] = request_blob(key, s, 0)
  if aff then new_aff[#new_aff + 1] = key end
  if gated then
    new_gated[#new_gated + 1] = ts; new_gated[#new_gated + 1] = key
    return 'g'
  end
  local level = new_active[prio]
  if not level then level = {}; new_active[prio] = level end
  level[#level + 1] = ts; level[#level + 1] = key
  return 'a'
end

local function update(key, s, rv, prio, gated, snn, fp, aff, sched)
  if rv > 0 and s[RV] > 0 and rv < s[RV] then
    redis.call('HDEL', K_POD, body_field(key, rv))
    return ''
  end
  local loc = locate(key, s)
  if rv ~= s[RV] then redis.call('HDEL', K_POD, body_field(key, s[RV])) end
  local changed = s[FP] ~= fp
  local old = {PRIO = s[PRIO], PLG = s[PLG]}
  -- Leave the old place first: the priority and the bucket may change with the update.
  if loc == 'a' or loc == 'u' then remove_from_queue(key, loc, s) end
  s[RV] = rv; s[FP] = fp; s[PRIO] = prio; s[SCHED] = sched
  -- Nominator (upstream UpdateNominatedPod): a nomination the scheduler made is kept while
  -- neither the old nor the new object carries one in its status.
  if s[SNN] ~= '' or snn ~= '' then s[NOM] = snn end
  s[SNN] = snn
  if aff then redis.call('SADD', K_AFF, key) else redis.call('SREM', K_AFF, key) end

  local r = loc
  if loc == 'a' then
    add_active(key, s) -- in place; a new priority re-sorts it
  elseif loc == 'b' then
    -- In place inside backoffQ, as upstream Update does.
  elseif loc == 'i' then
    -- Never dispatched twice while leased: remember the change for the outcome instead.
    if changed then s[DIRTY] = 1 end
  elseif loc == 'u' then
    local att = attempts(key)
    local exp = s[TS] + backoff_us(att, init, max)
    if not changed then
      park(key, s, att, init, max) -- stays (addOrUpdate), in its bucket for the new priority
    elseif exp > now then
      redis.call('ZADD', K_BACKOFF, exp, key) -- isPodUpdated and still backing off
      r = 'b'
    elseif gated then
      redis.call('ZADD', K_GATED, s[TS], key) -- addToActiveQ runs PreEnqueue again
      s[PLG] = GATES
      r = 'g'
    else
      add_active(key, s)
      r = 'a'
    end
  elseif loc == 'g' and changed and not gated then
    -- Gates removed: isPodBackingoff is never true for a gated pod, so straight to active.
    redis.call('ZREM', K_GATED, key)
    s[PLG] = ''
    redis.call('HDEL', K_WHY, key)
    add_active(key, s)
    r = 'a'
  end
  put_state(key, s, attempts(key))
  return r
end

local keys = {}
for i = 1, count do keys[i] = ARGV[4 + (i - 1) * F + 2] end
local known = states(keys)

for i = 1, count do
  local b = 4 + (i - 1) * F
  local key, uid, rv = ARGV[b + 2], ARGV[b + 3], tonumber(ARGV[b + 4])
  local prio, gated = tonumber(ARGV[b + 5]), ARGV[b + 6] == '1'
  local snn, fp, aff, sched = ARGV[b + 7], ARGV[b + 8], ARGV[b + 9] == '1', ARGV[b + 10]
  local s = known[i]
  if s and s[UID] ~= uid then
    -- A new pod with the same name: the old one is gone. Keep the new body (same field if
    -- both carry the same resourceVersion).
    if s[RV] == rv then s[RV] = -1 end
    if forget(key, s) == 'i' then leases_revoked() end
    s = nil
  end
  if s then
    local r = update(key, s, rv, prio, gated, snn, fp, aff, sched)
    if r == '' then ignored = ignored + 1 else updated = updated + 1 end
    result[i] = r
  else
    result[i] = insert(i, key, uid, rv, prio, gated, snn, fp, aff, sched)
    added = added + 1
  end
end

bulk('HSET', K_ST, new_st, 2)
bulk('HSET', K_RQ, new_rq, 2)
bulk('SADD', K_AFF, new_aff, 1)
bulk('ZADD', K_GATED, new_gated, 2)
for prio, level in pairs(new_active) do
  bulk('ZADD', active_key(prio), level, 2)
  redis.call('ZADD', K_PRIOS, -prio, prio)
end
stat('added', added); stat('updated', updated); stat('stale_events', ignored)
return result
