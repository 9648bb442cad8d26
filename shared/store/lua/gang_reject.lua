-- A gang member waited too long: unreserve every reserved member of that generation and start
-- a new one. ARGV: 1 gang, 2 generation, 3 stream maxlen.
-- Returns {"rejected", podkey, uid, attempt, ...}, {"permitted"} (too late: the gang may bind)
-- or {"stale"} (that generation is over).
local group, gen = ARGV[1], tonumber(ARGV[2])
local gk = gang_key(group)
if tonumber(redis.call("HGET", gk, "gen") or "0") ~= gen then return {"stale"} end
if redis.call("HGET", gk, "state") == "p" then return {"permitted"} end
local out = {"rejected"}
local members = gang_members_key(group)
for _, podkey in ipairs(redis.call("SMEMBERS", members)) do
  local raw = redis.call("HGET", CHARGES, podkey)
  if raw and cmsgpack.unpack(raw).s == "r" then
    local charge = release(podkey)
    emit_unreserved(ARGV[3], podkey, charge)
    record_attempt(charge.uid, charge.att, "u")
    table.insert(out, podkey)
    table.insert(out, charge.uid)
    table.insert(out, charge.att)
  end
end
redis.call("DEL", members)
redis.call("HINCRBY", gk, "gen", 1)
redis.call("HSET", gk, "state", "w")
redis.call("HDEL", gk, "since")
return out
