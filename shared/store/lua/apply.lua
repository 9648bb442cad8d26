-- Create or update objects. ARGV: 1 stream maxlen, 2 n, then n x (kind, key, body, uid, facts).
-- facts: Node -> msgpack node facts; Pod -> msgpack {node, c = charge, g = group, prio}.
-- An existing object keeps its uid. A pod created with spec.nodeName is bound at once; a bound
-- pod keeps its node (the nodeName of the new body is ignored when empty) and is recharged
-- with its new requests. Returns {rv1, uid1, rv2, uid2, ...} or {"err", index, message} (and
-- then nothing was written). ARGV[1] "check": only the checks run (nothing is written; {} when
-- they pass): an apply of several batches checks them all before writing the first.
local maxlen = ARGV[1]
local n = tonumber(ARGV[2])
local check_only = maxlen == "check"

for i = 0, n - 1 do
  local at = 3 + i * 5
  local kind, key = ARGV[at], ARGV[at + 1]
  if kind == "Pod" then
    local facts = cmsgpack.unpack(ARGV[at + 4])
    local bound = redis.call("HGET", PODNODE, key)
    if facts.node ~= "" then
      if bound and bound ~= facts.node then
        return {"err", i, "pod " .. key .. " is bound to " .. bound ..
                ": spec.nodeName cannot change to " .. facts.node}
      end
      if not bound and redis.call("HEXISTS", CHARGES, key) == 1 then
        return {"err", i, "pod " .. key .. " is being bound by the binder"}
      end
    end
  end
end
if check_only then return {} end

local out = {}
for i = 0, n - 1 do
  local at = 3 + i * 5
  local kind, key, body, uid, raw_facts = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3],
                                          ARGV[at + 4]
  local mk = meta_key(kind)
  local _, old_uid = split_pair(redis.call("HGET", mk, key))
  if old_uid then uid = old_uid end
  local facts = nil
  local extra = nil
  if kind == "Pod" then
    facts = cmsgpack.unpack(raw_facts)
    local bound = redis.call("HGET", PODNODE, key)
    extra = {node = bound or facts.node, nom = redis.call("HGET", NOMOF, key) or ""}
  end
  local rv = emit(maxlen, kind, key, "put", body, uid, extra)
  redis.call("HSET", obj_key(kind), key, body)
  redis.call("HSET", mk, key, int(rv) .. " " .. uid)
  if kind == "Node" then
    redis.call("HSET", NODE_FACTS, key, raw_facts)
  elseif kind == "Pod" then
    local raw = redis.call("HGET", CHARGES, key)
    if raw then
      local charge = cmsgpack.unpack(raw)
      if charge.s == "b" then
        add_usage(charge.node, charge, -1)
        charge.r = facts.c.r
        charge.p = facts.c.p
        charge.x = facts.c.x
        charge.prio = facts.prio
        add_usage(charge.node, charge, 1)
        redis.call("HSET", CHARGES, key, cmsgpack.pack(charge))
      end
    elseif facts.node ~= "" then
      local charge = {s = "b", node = facts.node, uid = uid, att = 0, g = facts.g, gen = 0,
                      prio = facts.prio, r = facts.c.r, p = facts.c.p, x = facts.c.x}
      add_usage(facts.node, charge, 1)
      redis.call("HSET", CHARGES, key, cmsgpack.pack(charge))
      redis.call("HSET", PODNODE, key, facts.node)
      if facts.g ~= "" then redis.call("HINCRBY", GANGBOUND, facts.g, 1) end
    end
  end
  table.insert(out, rv)
  table.insert(out, uid)
end
return out
