-- Everything at one resourceVersion. ARGV: the kinds.
-- Returns {rv, objects(kind1), meta(kind1), ..., podnode, nomof, {node, usage, ...},
--          {podkey, uid, node, holder, ...} (the reservations held)}.
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
local held = {}
for _, podkey in ipairs(redis.call("ZRANGE", RESV, 0, -1)) do
  local raw = redis.call("HGET", CHARGES, podkey)
  if raw then
    local charge = cmsgpack.unpack(raw)
    if charge.s == "r" then
      table.insert(held, podkey)
      table.insert(held, charge.uid)
      table.insert(held, charge.node)
      table.insert(held, charge.h or "")
    end
  end
end
table.insert(out, held)
return out
