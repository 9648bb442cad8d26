-- Delete one object. ARGV: 1 stream maxlen, 2 kind, 3 key, 4 expected uid ("" = any).
-- A pod gives back its reservation or binding and its nomination.
-- Returns {rv, uid}, {0, ""} when absent, {-1, uid} when the uid differs.
local maxlen, kind, key, want = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local mk = meta_key(kind)
local _, uid = split_pair(redis.call("HGET", mk, key))
if not uid then return {0, ""} end
if want ~= "" and want ~= uid then return {-1, uid} end
local body = redis.call("HGET", obj_key(kind), key)
local extra = nil
local nominated = nil
if kind == "Pod" then
  nominated = redis.call("HGET", NOMOF, key)
  extra = {node = redis.call("HGET", PODNODE, key) or "", nom = nominated or ""}
end
local rv = emit(maxlen, kind, key, "del", body, uid, extra)
redis.call("HDEL", obj_key(kind), key)
redis.call("HDEL", mk, key)
if kind == "Node" then
  redis.call("HDEL", NODE_FACTS, key)
elseif kind == "Pod" then
  release(key)
  if nominated then
    redis.call("HDEL", nom_key(nominated), key)
    redis.call("HDEL", NOMOF, key)
  end
  redis.call("HDEL", ATT, uid)
end
return {rv, uid}
