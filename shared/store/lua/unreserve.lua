-- Unreserve one attempt. ARGV: 1 pod key, 2 uid, 3 attempt, 4 state to record ("c" conflict,
-- "u" unreserved, "e" error). Returns 1 when a reservation was released, else 0.
local podkey, uid, attempt, state = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local released = 0
if reservation_of(podkey, uid, attempt) then
  release(podkey)
  released = 1
end
local seen = split_pair(redis.call("HGET", ATT, uid))
if not seen or seen <= attempt then record_attempt(uid, attempt, state) end
return released
