-- Attempt outcomes. Only the outcome of the current lease counts: same uid, same attempt,
-- pod still in flight; anything else is stale or a duplicate and changes nothing.
-- ARGV: now, initial_backoff, max_backoff, lease_us, count, then per outcome 8 fields:
--   key, uid, attempt, result, plugins (comma-separated), why, nominate ('-' keep, else '='
--   followed by the node name, '=' alone clears), lease_us override ('' default)
-- Returns per outcome: stale | done | extended | active | backoff | unschedulable
local now, init, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local lease, count = tonumber(ARGV[4]), tonumber(ARGV[5])
local F = 8
local mrc = move_request_cycle()
local out = {}
local stale, conflicts = 0, 0
for i = 1, count do
  local b = 5 + (i - 1) * F
  local key, uid, attempt, res = ARGV[b + 1], ARGV[b + 2], tonumber(ARGV[b + 3]), ARGV[b + 4]
  local plugins, why, nominate, lease_override = ARGV[b + 5], ARGV[b + 6], ARGV[b + 7], ARGV[b + 8]
  if redis.call('HGET', C_LOC, key) ~= 'i' or redis.call('HGET', C_UID, key) ~= uid
      or tonumber(redis.call('HGET', C_ATT, key)) ~= attempt then
    out[i] = 'stale'
    stale = stale + 1
  elseif res == 'extend' then
    local d = lease
    if lease_override ~= '' then d = tonumber(lease_override) end
    redis.call('ZADD', K_INFLIGHT, 'XX', now + d, key)
    out[i] = 'extended'
  elseif res == 'scheduled' then
    forget(key)
    out[i] = 'done'
  else
    redis.call('ZREM', K_INFLIGHT, key)
    local dirty = redis.call('HGET', C_DIRTY, key) == '1'
    redis.call('HDEL', C_DIRTY, key)
    if nominate ~= '-' then
      local node = string.sub(nominate, 2)
      if node == '' then redis.call('HDEL', C_NOM, key) else redis.call('HSET', C_NOM, key, node) end
    end
    if res == 'conflict' then
      -- Not the pod's fault: straight back to active, at its old place, no backoff.
      to_active(key)
      redis.call('HINCRBY', C_CFL, key, 1)
      conflicts = conflicts + 1
      out[i] = 'active'
    else
      -- AddUnschedulableIfNotPresent (SPEC A11): Timestamp = now, then the moveRequestCycle rule.
      local am = active_member(now, next_seq(1), key)
      redis.call('HSET', C_TS, key, now)
      redis.call('HSET', C_AM, key, am)
      if plugins == '' then redis.call('HDEL', C_PLG, key) else redis.call('HSET', C_PLG, key, plugins) end
      redis.call('HSET', C_WHY, key, why)
      local cycle = tonumber(redis.call('HGET', C_CYC, key))
      -- An update while in flight counts like a move request: the pod may now fit.
      if dirty or mrc >= cycle then
        local att = tonumber(redis.call('HGET', C_ATT, key))
        redis.call('ZADD', K_BACKOFF, now + backoff_us(att, init, max), key)
        redis.call('HSET', C_LOC, key, 'b')
        out[i] = 'backoff'
      else
        redis.call('ZADD', K_UNSCHED, now, key)
        redis.call('HSET', C_LOC, key, 'u')
        out[i] = 'unschedulable'
      end
    end
  end
end
stat('stale_outcomes', stale)
stat('conflicts', conflicts)
return out
