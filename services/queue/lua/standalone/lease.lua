-- The queue's record of pods of one tenant, read at once for the binder's lease checks
-- (services/queue/lease.py; no prelude): per pod, in flight?, attempts ended, its state.
-- KEYS: the tenant's cyc, att, st; ARGV: pod keys. Returns three values per pod, in order.
local out = {}
for i, key in ipairs(ARGV) do
  local at = 3 * (i - 1)
  out[at + 1] = redis.call('HEXISTS', KEYS[1], key)
  out[at + 2] = redis.call('HGET', KEYS[2], key)
  out[at + 3] = redis.call('HGET', KEYS[3], key)
end
return out
