-- Attempt outcomes. Only the outcome of the current lease counts: same uid, same attempt,
-- pod still in flight; anything else is stale or a duplicate and changes nothing.
-- ARGV: now, initial_backoff, max_backoff, lease_us, count, then per outcome 7 fields:
--   key, uid, attempt, result, plugins (sorted, comma-separated), nominate ('-' keep,
--   else '=' followed by the node name; '=' alone clears), lease_us override ('' default)
-- Returns per outcome: stale | noted | extended | active | backoff | unschedulable
-- (the caller stores the failure message of every failed attempt: backoff, unschedulable,
-- and a conflict sent back to active).
local now, init, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local lease, count = tonumber(ARGV[4]), tonumber(ARGV[5])
local F = 7
local mrc = move_request_cycle()
local out = {}
local stale, conflicts = 0, 0
for i = 1, count do
  local b = 5 + (i - 1) * F
  local key, uid, attempt, res = ARGV[b + 1], ARGV[b + 2], tonumber(ARGV[b + 3]), ARGV[b + 4]
  local plugins, nominate, lease_override = ARGV[b + 5], ARGV[b + 6], ARGV[b + 7]
  local s = get_state(key)
  local cycle = redis.call('HGET', K_CYC, key) -- false unless in flight
  if not cycle or not s or s[UID] ~= uid or attempts(key) + 1 ~= attempt then
    out[i] = 'stale'
    stale = stale + 1
  elseif res == 'extend' then
    local d = lease
    if lease_override ~= '' then d = tonumber(lease_override) end
    redis.call('ZADD', K_EXT, now + d, key) -- overrides its pop's lease from now on
    out[i] = 'extended'
  elseif res == 'scheduled' then
    -- Evidence, not an order: the pod leaves the queue when the store's change stream shows
    -- it bound (the informer's "bound" event), never on a message's word; a forged outcome
    -- cannot make the queue drop a pod. Only its pods to activate are acted on.
    out[i] = 'noted'
  else
    end_lease(key)
    redis.call('HSET', K_ATT, key, attempt) -- the attempt ended (pop counted it)
    local dirty = s[DIRTY] == 1
    s[DIRTY] = 0
    if nominate ~= '-' then s[NOM] = string.sub(nominate, 2) end
    if res == 'conflict' then
      -- The binder found the node taken by a proposal that won the race. The first time it
      -- is not the pod's fault: straight back to active, at its old place. Conflicts that
      -- repeat back off exponentially in their count (upstream sends binding failures to
      -- backoffQ), so a pod whose worker keeps seeing room that is not there cannot spin;
      -- the conflict outcome's facts correct the worker's view meanwhile.
      s[CFL] = s[CFL] + 1
      conflicts = conflicts + 1
      if s[CFL] <= 1 then
        add_active(key, s)
        out[i] = 'active'
      else
        redis.call('ZADD', K_BACKOFF, now + backoff_us(s[CFL] - 1, init, max), key)
        out[i] = 'backoff'
      end
    else
      -- AddUnschedulableIfNotPresent: Timestamp = now, then the moveRequestCycle rule.
      s[TS] = now
      s[PLG] = plugins
      -- An update while in flight counts like a move request: the pod may fit now.
      if dirty or mrc >= tonumber(cycle) then
        redis.call('ZADD', K_BACKOFF, now + backoff_us(attempt, init, max), key)
        out[i] = 'backoff'
      else
        park(key, s, attempt, init, max)
        out[i] = 'unschedulable'
      end
    end
    put_state(key, s, attempt)
  end
end
stat('stale_outcomes', stale)
stat('conflicts', conflicts)
return out
