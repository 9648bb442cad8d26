-- Set (or clear, node "") status.nominatedNodeName of a pod; a nominated pod counts on its
-- node for pods of lower or equal priority (check-and-reserve).
-- ARGV: 1 stream maxlen, 2 pod key, 3 uid, 4 node, 5 priority, 6 charge {r, p}.
-- Returns {"ok", rv}, {"same"} (nothing to change) or {"gone"}.
local maxlen, podkey, uid, node, prio = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local _, pod_uid = split_pair(redis.call("HGET", meta_key("Pod"), podkey))
if pod_uid ~= uid then return {"gone"} end
local old = redis.call("HGET", NOMOF, podkey)
if (old or "") == node then return {"same"} end
local body = redis.call("HGET", obj_key("Pod"), podkey)
local rv = emit(maxlen, "Pod", podkey, "put", body, uid,
                {node = redis.call("HGET", PODNODE, podkey) or "", nom = node, same = "1"})
redis.call("HSET", meta_key("Pod"), podkey, int(rv) .. " " .. uid)
if old then redis.call("HDEL", nom_key(old), podkey) end
if node == "" then
  redis.call("HDEL", NOMOF, podkey)
else
  local charge = cmsgpack.unpack(ARGV[6])
  redis.call("HSET", nom_key(node), podkey, cmsgpack.pack({prio = prio, r = charge.r, p = charge.p}))
  redis.call("HSET", NOMOF, podkey, node)
end
return {"ok", rv}
