-- The binder's check-and-reserve for one attempt of one pod on one node.
-- ARGV: 1 now, 2 pod key, 3 uid, 4 attempt, 5 node, 6 pod rv the caller checked (0: any),
--       7 node rv the caller checked (0: any), 8 pod priority, 9 charge {r, p},
--       10 fit check {n = resource names, a = amounts}, 11 tolerations {{key, op, value, effect}},
--       12 gang ("ns/group" or ""), 13 minMember, 14 reservation ttl (seconds),
--       15 stream maxlen, 16 holder (the reserving binder), 17 node checks the pod's profile
--       runs ("utpf": NodeUnschedulable, TaintToleration, NodePorts, NodeResourcesFit's pod
--       count; the resources to fit are ARGV 10), 18 "1": bind at once when nothing else
--       needs checking (see "Bind at once" below)
-- Returns one of
--   {"ok", store rv, gang ("none" | "permit" | "wait"), gang generation}
--       store rv: the reservation's own change-stream entry (kind "Reservation")
--   {"bound_at_once", store rv}     bound, no reservation (store rv: the binding's entry)
--   {"conflict", store rv, usage (msgpack [field, count, ...]), reason...}
--                                    final for this attempt (recorded, and streamed with the
--                                    usage: store rv is that entry's)
--   {"stale", seen attempt, state}   an older attempt: nothing changes
--   {"dup", state, node held, gen}   this attempt was seen already: nothing changes
--   {"gone"}                         no pod with this uid
--   {"bound", node}                  the pod is bound already
--   {"pod_changed", rv} / {"node_changed", rv}   re-read and call again (not recorded)
local now = tonumber(ARGV[1])
local podkey, uid, attempt, node = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local want_pod_rv, want_node_rv = tonumber(ARGV[6]), tonumber(ARGV[7])
local prio = tonumber(ARGV[8])
local charge = cmsgpack.unpack(ARGV[9])
local check = cmsgpack.unpack(ARGV[10])
local tolerations = cmsgpack.unpack(ARGV[11])
local group, min_member, ttl = ARGV[12], tonumber(ARGV[13]), tonumber(ARGV[14])
local maxlen, holder = ARGV[15], ARGV[16]
local checks = ARGV[17] or "utpf"
local bind_asked = ARGV[18] == "1"
local function runs(letter) return string.find(checks, letter, 1, true) ~= nil end

local seen, seen_state = split_pair(redis.call("HGET", ATT, uid))
if seen then
  if attempt < seen then return {"stale", seen, seen_state} end
  if attempt == seen then
    local held = reservation_of(podkey, uid, attempt)
    if held then return {"dup", seen_state, held.node, held.gen} end
    return {"dup", seen_state, redis.call("HGET", PODNODE, podkey) or "", 0}
  end
end

local pod_rv, pod_uid = split_pair(redis.call("HGET", meta_key("Pod"), podkey))
if pod_uid ~= uid then return {"gone"} end
-- The pod's charge, if any: its binding (a bound pod's charge, with PODNODE, see
-- commit_binding) or a reservation.
local held_raw = redis.call("HGET", CHARGES, podkey)
local held = held_raw and cmsgpack.unpack(held_raw)
if held and held.s == "b" then return {"bound", held.node} end
if want_pod_rv > 0 and pod_rv ~= want_pod_rv then return {"pod_changed", pod_rv} end
-- A reservation of an older attempt was abandoned (its binder vanished and the queue's lease
-- expired): this attempt supersedes it.
if held then emit_unreserved(maxlen, podkey, release(podkey)) end

-- A conflict carries the authoritative facts the worker's view disagreed with: the store's
-- resourceVersion and the node's usage (reserved and bound pods), so the worker can tell a
-- view that is merely behind from one that counts wrong (see worker ConflictFacts).
local function reject(...)
  local usage = cmsgpack.pack(redis.call("HGETALL", usage_key(node)))
  local rv = emit_ended(maxlen, podkey, uid, attempt, node, holder, usage)
  record_attempt(uid, attempt, "c")
  return {"conflict", rv, usage, ...}
end

-- upstream v1 Toleration.ToleratesTaint
local function tolerates(key, value, effect)
  for _, t in ipairs(tolerations) do
    if (t[4] == "" or t[4] == effect) and (t[1] == "" or t[1] == key) then
      if t[2] == "" or t[2] == "Equal" then
        if t[3] == value then return true end
      elseif t[2] == "Exists" then
        return true
      end
    end
  end
  return false
end

local node_rv = split_pair(redis.call("HGET", meta_key("Node"), node))
if not node_rv then return reject('node "' .. node .. '" not found') end
if want_node_rv > 0 and node_rv ~= want_node_rv then return {"node_changed", node_rv} end
local facts = cmsgpack.unpack(redis.call("HGET", NODE_FACTS, node))

-- NodeUnschedulable, TaintToleration
if runs("u") and facts.u
    and not tolerates("node.kubernetes.io/unschedulable", "", "NoSchedule") then
  return reject("node(s) were unschedulable")
end
if runs("t") then
  for _, taint in ipairs(facts.t) do
    if not tolerates(taint[1], taint[2], taint[3]) then
      return reject("node(s) had untolerated taint {" .. taint[1] .. ": " .. taint[2] .. "}")
    end
  end
end

-- What the node's reserved and bound pods use, plus the nominated pods of at least this
-- priority (upstream addGENominatedPods).
local used = {}
local flat = redis.call("HGETALL", usage_key(node))
for i = 1, #flat, 2 do used[flat[i]] = tonumber(flat[i + 1]) end
local ports = {}
for field, count in pairs(used) do
  if count > 0 and string.sub(field, 1, 3) == "hp:" then
    local proto, port, ip = string.match(field, "^hp:([^:]*):(%d+):(.*)$")
    table.insert(ports, {proto, port, ip})
  end
end
local nominated_pods = 0
local nominated = {}
local noms = redis.call("HGETALL", nom_key(node))
for i = 1, #noms, 2 do
  -- A nominated pod that holds a reservation is in the usage already (counted once).
  if noms[i] ~= podkey and redis.call("HEXISTS", CHARGES, noms[i]) == 0 then
    local rec = cmsgpack.unpack(noms[i + 1])
    if rec.prio >= prio then
      nominated_pods = nominated_pods + 1
      for resource, amount in pairs(rec.r) do
        nominated[resource] = (nominated[resource] or 0) + amount
      end
      for _, p in ipairs(rec.p) do table.insert(ports, {p[1], int(p[2]), p[3]}) end
    end
  end
end

-- NodePorts (upstream HostPortInfo.CheckConflict)
for _, want in ipairs(runs("p") and charge.p or {}) do
  local port = int(want[2])
  for _, have in ipairs(ports) do
    if have[1] == want[1] and have[2] == port
        and (want[3] == "0.0.0.0" or have[3] == "0.0.0.0" or have[3] == want[3]) then
      return reject("node(s) didn't have free ports for the requested pod ports")
    end
  end
end

-- NodeResourcesFit (upstream fitsRequest)
local alloc = facts.a
local reasons = {}
if runs("f") and (used["pods"] or 0) + nominated_pods + 1 > (alloc["pods"] or 0) then
  table.insert(reasons, "Too many pods")
end
for i, resource in ipairs(check.n) do
  local free = (alloc[resource] or 0) - (used["r:" .. resource] or 0) - (nominated[resource] or 0)
  if check.a[i] > free then table.insert(reasons, "Insufficient " .. resource) end
end
if #reasons > 0 then return reject(unpack(reasons)) end

-- Reserve.
local gen = 0
if group ~= "" then gen = tonumber(redis.call("HGET", gang_key(group), "gen") or "0") end
local record = {s = "r", node = node, uid = uid, att = attempt, g = group, gen = gen, prio = prio,
                r = charge.r, p = charge.p, x = charge.x, h = holder}
add_usage(node, record, 1)

-- Bind at once. The binder asks for it only for a pod with no cross-node constraint of its
-- own (no required pod affinity or anti-affinity, no DoNotSchedule spread) that waits at no
-- Permit: such a pod fits this node whatever the other nodes hold, unless some reserved or
-- bound pod has required anti-affinity terms that can match pods of its namespace (they may
-- exclude it from the node's domain). With none, the reservation and its cross-node check would change nothing: the
-- pod is bound here, with one change-stream entry instead of two.
local function repelled()
  local namespace = string.match(podkey, "^([^/]*)/") or ""
  local counts = redis.call("MGET", anti_affinity_key("*"), anti_affinity_key(namespace))
  return tonumber(counts[1] or "0") > 0 or tonumber(counts[2] or "0") > 0
end
if bind_asked and group == "" and not charge.x and not repelled() then
  return {"bound_at_once", commit_binding(maxlen, podkey, uid, attempt, record, node, false)}
end
redis.call("HSET", CHARGES, podkey, cmsgpack.pack(record))
redis.call("ZADD", RESV, now + ttl, podkey)
record_attempt(uid, attempt, "r")
local store_rv = emit(maxlen, "Reservation", podkey, "put", nil, uid, {node = node, h = holder})
if group == "" then return {"ok", store_rv, "none", 0} end

-- Coscheduling Permit: allow once minMember pods of the gang are reserved or bound.
local gk = gang_key(group)
local members = gang_members_key(group)
redis.call("SADD", members, podkey)
local assigned = redis.call("SCARD", members) + tonumber(redis.call("HGET", GANGBOUND, group) or "0")
local state = redis.call("HGET", gk, "state")
if state == "p" or assigned >= min_member then
  redis.call("HSET", gk, "gen", int(gen), "state", "p")
  return {"ok", store_rv, "permit", gen}
end
if state ~= "w" or not redis.call("HGET", gk, "since") then
  redis.call("HSET", gk, "gen", int(gen), "state", "w", "since", tostring(now))
end
return {"ok", store_rv, "wait", gen}
