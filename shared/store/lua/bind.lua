-- Bind a reserved pod: its reservation becomes a binding, spec.nodeName is set (the pod's
-- resourceVersion moves and the change is streamed), its nomination is cleared.
-- ARGV: 1 stream maxlen, 2 pod key, 3 uid, 4 attempt, 5 node.
-- Returns {"ok", rv}, {"lost"} (no such reservation any more) or {"gone"} (pod deleted).
local maxlen, podkey, uid, attempt, node = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local charge = reservation_of(podkey, uid, attempt)
if not charge or charge.node ~= node then return {"lost"} end
local _, pod_uid = split_pair(redis.call("HGET", meta_key("Pod"), podkey))
if pod_uid ~= uid then
  release(podkey)
  return {"gone"}
end
local rv = commit_binding(maxlen, podkey, uid, attempt, charge, node, true)
if charge.g ~= "" then
  redis.call("SREM", gang_members_key(charge.g), podkey)
  redis.call("HINCRBY", GANGBOUND, charge.g, 1)
  settle_gang(charge.g)
end
return {"ok", rv}
