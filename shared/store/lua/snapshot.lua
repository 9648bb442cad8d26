-- Everything at one resourceVersion. ARGV: the kinds.
-- Returns {rv, objects(kind1), meta(kind1), ..., podnode, nomof, {node, usage, ...}}.
local out = {redis.call("GET", RV_KEY) or "0"}
for _, kind in ipairs(ARGV) do
  table.insert(out, redis.call("HGETALL", obj_key(kind)))
  table.insert(out, redis.call("HGETALL", meta_key(kind)))
end
table.insert(out, redis.call("HGETALL", PODNODE))
table.insert(out, redis.call("HGETALL", NOMOF))
local usage = {}
for _, node in ipairs(redis.call("SMEMBERS", USAGE_NODES)) do
  table.insert(usage, node)
  table.insert(usage, redis.call("HGETALL", usage_key(node)))
end
table.insert(out, usage)
return out
