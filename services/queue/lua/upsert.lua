-- Add (SPEC A9/A10) and Update (A15-A17) of a batch of pods (keys unique within a batch).
-- ARGV: now, initial_backoff, max_backoff, count, then per pod 12 fields:
--   op, key, uid, rv, prio, gated ('1' or ''), status nominatedNodeName, fingerprint,
--   has required pod affinity ('1' or ''), schedulerName, why (gated message), pod body
-- An add of a pod the queue already holds (same uid) is an update: Kafka delivers at least
-- once. Returns, per pod, where it is now (a/b/u/g/i), or '' when the event was stale.
local now, init, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local count = tonumber(ARGV[4])
local F = 12
local GATES = 'SchedulingGates'

local seq = next_seq(count)
local result = {}
local new_st, new_pod, new_why, new_aff, new_active, new_gated = {}, {}, {}, {}, {}, {}
local added, updated, ignored = 0, 0, 0

local function insert(key, uid, rv, prio, gated, snn, fp, aff, sched, why, body)
  local plg = ''
  if gated then plg = GATES end
  local s = {uid, rv, prio, now, now, 0, 0, seq, plg, snn, snn, 0, 0, 0, fp, sched}
  seq = seq + 1
  new_st[#new_st + 1] = key; new_st[#new_st + 1] = cmsgpack.pack(s)
  new_pod[#new_pod + 1] = key; new_pod[#new_pod + 1] = body
  if aff then new_aff[#new_aff + 1] = key end
  if gated then
    new_gated[#new_gated + 1] = now; new_gated[#new_gated + 1] = key
    new_why[#new_why + 1] = key; new_why[#new_why + 1] = why
    return 'g'
  end
  push_active(new_active, s, key)
  return 'a'
end

local function update(key, s, uid, rv, prio, gated, snn, fp, aff, sched, why, body)
  if rv > 0 and s[RV] > 0 and rv < s[RV] then return '' end
  local loc = locate(key)
  local changed = s[FP] ~= fp
  local old_prio = s[PRIO]
  redis.call('HSET', K_POD, key, body)
  s[RV] = rv; s[FP] = fp; s[PRIO] = prio; s[SCHED] = sched
  -- Nominator (upstream UpdateNominatedPod): a nomination the scheduler made is kept while
  -- neither the old nor the new object carries one in its status.
  if s[SNN] ~= '' or snn ~= '' then s[NOM] = snn end
  s[SNN] = snn
  if aff then redis.call('SADD', K_AFF, key) else redis.call('SREM', K_AFF, key) end

  local r = loc
  if loc == 'a' then
    -- In place; a new priority re-sorts it (ZADD on the same member updates the score).
    if prio ~= old_prio then to_active(key, s) end
  elseif loc == 'b' then
    -- In place inside backoffQ (SPEC A15, decision 6).
  elseif loc == 'i' then
    -- Never dispatched twice while leased: remember the change for the outcome instead.
    if changed then s[DIRTY] = 1 end
  elseif changed then
    -- unschedulablePods, gated or not (A16).
    if loc == 'g' and gated then
      redis.call('HSET', K_WHY, key, why)
    elseif loc == 'u' and s[TS] + backoff_us(s[ATT], init, max) > now then
      -- Still backing off (isPodBackingoff is never true for gated pods).
      redis.call('ZREM', K_UNSCHED, key)
      redis.call('ZADD', K_BACKOFF, s[TS] + backoff_us(s[ATT], init, max), key)
      r = 'b'
    elseif gated then
      -- addToActiveQ runs PreEnqueue (scheduling gates) again.
      remove_from_queue(key, loc, s)
      redis.call('ZADD', K_GATED, s[TS], key)
      s[PLG] = GATES
      redis.call('HSET', K_WHY, key, why)
      r = 'g'
    else
      remove_from_queue(key, loc, s)
      if loc == 'g' then
        s[PLG] = ''
        redis.call('HDEL', K_WHY, key)
      end
      to_active(key, s)
      r = 'a'
    end
  end
  put_state(key, s)
  return r
end

local keys = {}
for i = 1, count do keys[i] = ARGV[4 + (i - 1) * F + 2] end
local known = states(keys)

for i = 1, count do
  local b = 4 + (i - 1) * F
  local key, uid, rv = ARGV[b + 2], ARGV[b + 3], tonumber(ARGV[b + 4])
  local prio, gated = tonumber(ARGV[b + 5]), ARGV[b + 6] == '1'
  local snn, fp, aff = ARGV[b + 7], ARGV[b + 8], ARGV[b + 9] == '1'
  local sched, why, body = ARGV[b + 10], ARGV[b + 11], ARGV[b + 12]
  local s = known[i]
  if s and s[UID] ~= uid then
    forget(key) -- a new pod with the same name: the old one is gone
    s = nil
  end
  if s then
    local r = update(key, s, uid, rv, prio, gated, snn, fp, aff, sched, why, body)
    if r == '' then ignored = ignored + 1 else updated = updated + 1 end
    result[i] = r
  else
    result[i] = insert(key, uid, rv, prio, gated, snn, fp, aff, sched, why, body)
    added = added + 1
  end
end

bulk('HSET', K_ST, new_st, 2)
bulk('HSET', K_POD, new_pod, 2)
bulk('HSET', K_WHY, new_why, 2)
bulk('SADD', K_AFF, new_aff, 1)
bulk('ZADD', K_ACTIVE, new_active, 2)
bulk('ZADD', K_GATED, new_gated, 2)
stat('added', added); stat('updated', updated); stat('stale_events', ignored)
return result
