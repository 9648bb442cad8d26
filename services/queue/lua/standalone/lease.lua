-- The queue's record of one pod, read at once for the binder's lease check
-- (services/queue/lease.py; no prelude): in flight?, attempts ended, its state.
-- KEYS: the tenant's cyc, att, st; ARGV[1]: the pod key.
return {
  redis.call('HEXISTS', KEYS[1], ARGV[1]),
  redis.call('HGET', KEYS[2], ARGV[1]),
  redis.call('HGET', KEYS[3], ARGV[1]),
}
