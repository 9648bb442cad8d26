-- Release one pod's charge (only the life with that uid, when given).
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local rec = cmsgpack.unpack(raw)
if ARGV[2] ~= '' and rec.uid ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
for field, amount in pairs(rec.charge) do
  redis.call('HINCRBY', KEYS[2], field, -amount)
end
return 1
