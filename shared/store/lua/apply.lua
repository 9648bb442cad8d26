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

-- The kubelet's admission of a pod bound by name (facts.k: a user's write): it must fit what
-- its node has left, counting the pods bound by name earlier in this batch, or nothing is
-- written (the kubelet would fail it: OutOfcpu, OutOfpods, NodePorts...).
local batch_nodes, batch_used = {}, {}
for i = 0, n - 1 do
  local at = 3 + i * 5
  if ARGV[at] == "Node" then batch_nodes[ARGV[at + 1]] = cmsgpack.unpack(ARGV[at + 4]) end
end
local function short(resource, want, used, capacity)
  return "OutOf" .. resource .. ": Node didn't have enough resource: " .. resource ..
         ", requested: " .. int(want) .. ", used: " .. int(used) .. ", capacity: " ..
         int(capacity)
end
local function kubelet_refusal(node, charge)
  local facts = batch_nodes[node]
  if not facts then
    local raw = redis.call("HGET", NODE_FACTS, node)
    if not raw then return 'node "' .. node .. '" not found' end
    facts = cmsgpack.unpack(raw)
  end
  local used = batch_used[node]
  if not used then
    used = {}
    local flat = redis.call("HGETALL", usage_key(node))
    for j = 1, #flat, 2 do used[flat[j]] = tonumber(flat[j + 1]) end
    batch_used[node] = used
  end
  local alloc = facts.a
  if (used["pods"] or 0) + 1 > (alloc["pods"] or 0) then
    return short("pods", 1, used["pods"] or 0, alloc["pods"] or 0)
  end
  local names = {}
  for resource, _ in pairs(charge.r) do table.insert(names, resource) end
  table.sort(names)
  for _, resource in ipairs(names) do
    local want, have = charge.r[resource], used["r:" .. resource] or 0
    if want > 0 and want > (alloc[resource] or 0) - have then
      return short(resource, want, have, alloc[resource] or 0)
    end
  end
  for _, p in ipairs(charge.p) do
    for field, count in pairs(used) do
      if count > 0 and string.sub(field, 1, 3) == "hp:" then
        local proto, port, ip = string.match(field, "^hp:([^:]*):(%d+):(.*)$")
        if proto == p[1] and port == int(p[2])
            and (p[3] == "0.0.0.0" or ip == "0.0.0.0" or ip == p[3]) then
          return "NodePorts: node(s) didn't have free ports for the requested pod ports"
        end
      end
    end
  end
  used["pods"] = (used["pods"] or 0) + 1
  for resource, amount in pairs(charge.r) do
    used["r:" .. resource] = (used["r:" .. resource] or 0) + amount
  end
  for _, p in ipairs(charge.p) do
    local field = "hp:" .. p[1] .. ":" .. int(p[2]) .. ":" .. p[3]
    used[field] = (used[field] or 0) + 1
  end
  return nil
end

for i = 0, n - 1 do
  local at = 3 + i * 5
  local kind, key = ARGV[at], ARGV[at + 1]
  if kind == "Pod" then
    local facts = cmsgpack.unpack(ARGV[at + 4])
    if facts.node ~= "" then
      local bound = redis.call("HGET", PODNODE, key)
      if bound and bound ~= facts.node then
        return {"err", i, "pod " .. key .. " is bound to " .. bound ..
                ": spec.nodeName cannot change to " .. facts.node}
      end
      if not bound and redis.call("HEXISTS", CHARGES, key) == 1 then
        return {"err", i, "pod " .. key .. " is being bound by the binder"}
      end
      if facts.k and not bound then
        local refusal = kubelet_refusal(facts.node, facts.c)
        if refusal then
          return {"err", i, "Pod " .. key .. ": spec.nodeName: " .. refusal}
        end
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
    -- A pod that is not stored has no binding, nomination or charge either (delete.lua
    -- gives them back with the pod): a new pod's write skips their lookups.
    local bound = old_uid and redis.call("HGET", PODNODE, key)
    extra = {node = bound or facts.node, nom = old_uid and redis.call("HGET", NOMOF, key) or ""}
  end
  local rv = emit(maxlen, kind, key, "put", body, uid, extra)
  redis.call("HSET", obj_key(kind), key, body)
  redis.call("HSET", mk, key, int(rv) .. " " .. uid)
  if kind == "Node" then
    redis.call("HSET", NODE_FACTS, key, raw_facts)
  elseif kind == "Pod" then
    local raw = old_uid and redis.call("HGET", CHARGES, key)
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
