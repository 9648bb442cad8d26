-- Unreserve one attempt. ARGV: 1 pod key, 2 uid, 3 attempt, 4 state to record ("c" conflict,
-- "u" unreserved, "e" error), 5 stream maxlen. The attempt's end is streamed either way.
-- Returns 1 when a reservation was released, else 0.
local podkey, uid, attempt, state, maxlen = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local released = 0
if reservation_of(podkey, uid, attempt) then
  emit_unreserved(maxlen, podkey, release(podkey))
  released = 1
else
  emit_ended(maxlen, podkey, uid, attempt)  -- it may have been assumed all the same
end
local seen = split_pair(redis.call("HGET", ATT, uid))
if not seen or seen <= attempt then record_attempt(uid, attempt, state) end
return released
