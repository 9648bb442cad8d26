-- Release reservations whose binder vanished. ARGV: 1 now, 2 limit, 3 stream maxlen.
-- Returns {podkey, uid, attempt, ...} of the released reservations.
local keys = redis.call("ZRANGEBYSCORE", RESV, "-inf", ARGV[1], "LIMIT", 0, tonumber(ARGV[2]))
local out = {}
for _, podkey in ipairs(keys) do
  local raw = redis.call("HGET", CHARGES, podkey)
  if raw and cmsgpack.unpack(raw).s == "r" then
    local charge = release(podkey)
    emit_unreserved(ARGV[3], podkey, charge)
    record_attempt(charge.uid, charge.att, "x")
    table.insert(out, podkey)
    table.insert(out, charge.uid)
    table.insert(out, charge.att)
  else
    redis.call("ZREM", RESV, podkey)
  end
end
return out
