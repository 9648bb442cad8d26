-- Release pods' charges: ARGV pod key, uid, ... (only the life with that uid, when given).
local released = 0
for i = 1, #ARGV, 2 do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  if raw then
    local rec = cmsgpack.unpack(raw)
    if ARGV[i + 1] == '' or rec.uid == ARGV[i + 1] then
      redis.call('HDEL', KEYS[1], ARGV[i])
      for field, amount in pairs(rec.charge) do
        redis.call('HINCRBY', KEYS[2], field, -amount)
      end
      released = released + 1
    end
  end
end
return released
