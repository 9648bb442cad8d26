-- Shared by every store script (Redis 6.2 Lua: scripts cannot share functions, so this text is
-- prepended to each). KEYS[1] is <base>rv; the other keys derive from its prefix, see
-- shared/store/keys.py for the layout (tests/store/test_lua_keys.py checks the names below
-- against it). All of them carry the cluster's hash tag.
local RV_KEY = KEYS[1]
local BASE = string.sub(RV_KEY, 1, -3)
local STREAM = BASE .. "stream"
local CHARGES = BASE .. "charge"
local PODNODE = BASE .. "podnode"
local RESV = BASE .. "resv"
local ATT = BASE .. "att"
local NOMOF = BASE .. "nomof"
local GANGBOUND = BASE .. "gangbound"
local USAGE_NODES = BASE .. "usage-nodes"
local NODE_FACTS = BASE .. "nf"

local function meta_key(kind) return BASE .. "meta:" .. kind end
local function obj_key(kind) return BASE .. "obj:" .. kind end
local function usage_key(node) return BASE .. "usage:" .. node end
local function nom_key(node) return BASE .. "nom:" .. node end
local function gang_key(group) return BASE .. "gang:" .. group end
local function gang_members_key(group) return BASE .. "gangm:" .. group end
local function anti_affinity_key(scope) return BASE .. "antiaff:" .. scope end

-- Lua numbers are doubles; "%d" prints integers without an exponent.
local function int(n) return string.format("%d", n) end

-- "<number> <text>" (meta "<rv> <uid>", attempts "<attempt> <state>") -> number, text
local function split_pair(raw)
  if not raw then return nil, nil end
  local sp = string.find(raw, " ", 1, true)
  return tonumber(string.sub(raw, 1, sp - 1)), string.sub(raw, sp + 1)
end

-- One change: bump the resourceVersion and append its stream entry (id "<rv>-0") before any
-- other write of the change, so a failing XADD leaves nothing half-done.
local function emit(maxlen, kind, key, op, body, uid, extra)
  local rv = redis.call("INCR", RV_KEY)
  local args = {"XADD", STREAM, "MAXLEN", "~", maxlen, int(rv) .. "-0",
                "k", kind, "n", key, "o", op, "u", uid}
  if body then
    table.insert(args, "b")
    table.insert(args, body)
  end
  if extra then
    for field, value in pairs(extra) do
      table.insert(args, field)
      table.insert(args, value)
    end
  end
  redis.call(unpack(args))
  return rv
end

-- Add (sign 1) or remove (sign -1) a charge {r = {resource = amount}, p = {{proto, port, ip}},
-- x = the namespaces the pod's required anti-affinity terms can match, "*" for any} and one
-- pod slot to a node's usage; fields that drop to zero are removed. Pods with anti-affinity
-- are also counted per namespace they can repel (anti_affinity_key): while none can repel a
-- pod without cross-node constraints of its own, it may bind without a cross-node check
-- (reserve.lua, "bind at once").
local function add_usage(node, charge, sign)
  local key = usage_key(node)
  -- A node joins USAGE_NODES with its first pod: its usage hash keeps the "pods" field (at
  -- zero too) and the set keeps the node from then on, so later pods need no SADD.
  if redis.call("HINCRBY", key, "pods", sign) == 1 and sign == 1 then
    redis.call("SADD", USAGE_NODES, node)
  end
  for _, scope in ipairs(charge.x or {}) do
    if redis.call("INCRBY", anti_affinity_key(scope), sign) == 0 then
      redis.call("DEL", anti_affinity_key(scope))
    end
  end
  for resource, amount in pairs(charge.r) do
    local field = "r:" .. resource
    if redis.call("HINCRBY", key, field, sign * amount) == 0 then
      redis.call("HDEL", key, field)
    end
  end
  for _, port in ipairs(charge.p) do
    local field = "hp:" .. port[1] .. ":" .. int(port[2]) .. ":" .. port[3]
    if redis.call("HINCRBY", key, field, sign) <= 0 then
      redis.call("HDEL", key, field)
    end
  end
end

-- A permitted gang generation whose reserved members are all gone (bound or released) ends:
-- the next member starts a new generation and counts bound members afresh.
local function settle_gang(group)
  local gk = gang_key(group)
  if redis.call("SCARD", gang_members_key(group)) == 0
      and redis.call("HGET", gk, "state") == "p" then
    redis.call("HINCRBY", gk, "gen", 1)
    redis.call("HSET", gk, "state", "w")
    redis.call("HDEL", gk, "since")
  end
end

-- Give back what a pod's charge holds (reservation or binding); returns the charge or nil.
local function release(podkey)
  local raw = redis.call("HGET", CHARGES, podkey)
  if not raw then return nil end
  local charge = cmsgpack.unpack(raw)
  add_usage(charge.node, charge, -1)
  redis.call("HDEL", CHARGES, podkey)
  redis.call("ZREM", RESV, podkey)
  if charge.s == "b" then
    redis.call("HDEL", PODNODE, podkey)
    if charge.g ~= "" and redis.call("HINCRBY", GANGBOUND, charge.g, -1) <= 0 then
      redis.call("HDEL", GANGBOUND, charge.g)
    end
  elseif charge.g ~= "" then
    redis.call("SREM", gang_members_key(charge.g), podkey)
    settle_gang(charge.g)
  end
  return charge
end

-- The reservation of `attempt` of pod `uid`, or nil.
local function reservation_of(podkey, uid, attempt)
  local raw = redis.call("HGET", CHARGES, podkey)
  if not raw then return nil end
  local charge = cmsgpack.unpack(raw)
  if charge.s ~= "r" or charge.uid ~= uid or charge.att ~= attempt then return nil end
  return charge
end

-- Reservations are streamed too (kind "Reservation", no body; fields node and h = the
-- binder holding it), so that a binder's cross-node checks count the reservations other
-- binders took before its own. A reservation ends in a binding (the pod's own entry), with
-- the pod's deletion, or with a "del" entry, which carries the attempt (att) that held it.
--
-- An attempt that ends without a binding is streamed the same way, reservation or not
-- (`emit_ended`): the scheduler that assumed the pod forgets its assumption when its view
-- reaches the entry, as it reaches every other fact; no outcome message is needed for it.
-- `usage` (a conflict found by check-and-reserve): the node's usage hash then, flat, packed;
-- every view compares what it counts there at that very version.
local function emit_ended(maxlen, podkey, uid, attempt, node, holder, usage)
  local extra = {node = node or "", h = holder or "", att = int(attempt)}
  if usage then extra.usage = usage end
  return emit(maxlen, "Reservation", podkey, "del", nil, uid, extra)
end

local function emit_unreserved(maxlen, podkey, charge)
  emit_ended(maxlen, podkey, charge.uid, charge.att, charge.node, charge.h)
end

local function record_attempt(uid, attempt, state)
  redis.call("HSET", ATT, uid, int(attempt) .. " " .. state)
end

-- Turn the pod's charge (held as a reservation, or about to be) into its binding: the pod's
-- resourceVersion moves with a change-stream entry carrying the node ("same": the body is the
-- one of the pod's previous entry, so followers may reuse their copy), its nomination ends.
-- `reserved`: the charge was held as a reservation (its expiry entry goes). Returns the
-- binding's resourceVersion.
local function commit_binding(maxlen, podkey, uid, attempt, charge, node, reserved)
  local nominated = redis.call("HGET", NOMOF, podkey)
  local body = redis.call("HGET", obj_key("Pod"), podkey)
  local rv = emit(maxlen, "Pod", podkey, "put", body, uid, {node = node, nom = "", same = "1"})
  redis.call("HSET", meta_key("Pod"), podkey, int(rv) .. " " .. uid)
  charge.s = "b"
  redis.call("HSET", CHARGES, podkey, cmsgpack.pack(charge))
  if reserved then redis.call("ZREM", RESV, podkey) end
  redis.call("HSET", PODNODE, podkey, node)
  record_attempt(uid, attempt, "b")
  if nominated then
    redis.call("HDEL", nom_key(nominated), podkey)
    redis.call("HDEL", NOMOF, podkey)
  end
  return rv
end
