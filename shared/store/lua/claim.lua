-- Claim an attempt that reserves nothing (a preemption, or an attempt that ended before its
-- reservation). ARGV: 1 uid, 2 attempt, 3 state, 4 pod key and 5 stream maxlen (optional: the
-- attempt's end is streamed, see emit_ended; not for "p", a preemption under way).
-- Returns {"ok"}, {"stale", seen, state} or {"dup", state}.
local uid, attempt, state = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local seen, seen_state = split_pair(redis.call("HGET", ATT, uid))
if seen and attempt < seen then return {"stale", seen, seen_state} end
if seen and attempt == seen then return {"dup", seen_state} end
if ARGV[4] and state ~= "p" then emit_ended(ARGV[5], ARGV[4], uid, attempt) end
record_attempt(uid, attempt, state)
return {"ok"}
