-- MoveAllToActiveOrBackoffQueue (SPEC A20-A23), the unschedulable-leftover flush (A33) and
-- the assigned-pod variants (A26/A27: a preCheck's chosen keys).
-- ARGV: now, initial_backoff, max_backoff, mode, plugins, then for mode 'keys' the pod keys.
--   mode 'all': every unschedulable pod; 'keys': only the given ones (if unschedulable);
--   'leftover:<cutoff>': pods parked strictly before cutoff (now - Timestamp > max duration).
--   plugins: '*' (a wildcard event) or the event's plugins, comma-separated.
-- Returns {moved to active, moved to backoff, left in place}.
local now, init, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local mode, plugins = ARGV[4], ARGV[5]

local candidates
if mode == 'all' then
  candidates = redis.call('ZRANGE', K_UNSCHED, 0, -1)
elseif mode == 'keys' then
  candidates = {}
  for i = 6, #ARGV do
    if redis.call('ZSCORE', K_UNSCHED, ARGV[i]) then candidates[#candidates + 1] = ARGV[i] end
  end
else
  local cutoff = string.sub(mode, 10)
  candidates = redis.call('ZRANGEBYSCORE', K_UNSCHED, '-inf', '(' .. cutoff)
  -- upstream calls movePodsToActiveOrBackoffQueue (which sets moveRequestCycle) only when
  -- some pod is left over.
  if #candidates == 0 then return {0, 0, 0} end
end

local wildcard = plugins == '*'
local wanted = {}
for name in string.gmatch(plugins, '[^,]+') do wanted[name] = true end

local st = states(candidates)
local moving, active, backoff = {}, {}, {}
local to_active, to_backoff, kept = 0, 0, 0
for i = 1, #candidates do
  local key, s = candidates[i], st[i]
  local p = s[PLG]
  -- No failed plugin: an error or a failure outside Filter; it moves on any event (A21).
  local match = wildcard or p == ''
  if not match then
    for name in string.gmatch(p, '[^,]+') do
      if wanted[name] then match = true; break end
    end
  end
  if match then
    moving[#moving + 1] = key
    local exp = s[TS] + backoff_us(s[ATT], init, max)
    if exp > now then
      backoff[#backoff + 1] = exp; backoff[#backoff + 1] = key
      to_backoff = to_backoff + 1
    else
      push_active(active, s, key)
      to_active = to_active + 1
    end
  else
    kept = kept + 1
  end
end
bulk('ZREM', K_UNSCHED, moving, 1)
bulk('ZADD', K_BACKOFF, backoff, 2)
bulk('ZADD', K_ACTIVE, active, 2)
-- A23: always, even when nothing moved.
redis.call('HSET', K_CTR, 'mrc', scheduling_cycle())
stat('woken', to_active + to_backoff)
return {to_active, to_backoff, kept}
