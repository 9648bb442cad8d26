-- Claim an attempt that reserves nothing (a preemption). ARGV: 1 uid, 2 attempt, 3 state.
-- Returns {"ok"}, {"stale", seen, state} or {"dup", state}.
local uid, attempt, state = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local seen, seen_state = split_pair(redis.call("HGET", ATT, uid))
if seen and attempt < seen then return {"stale", seen, seen_state} end
if seen and attempt == seen then return {"dup", seen_state} end
record_attempt(uid, attempt, state)
return {"ok"}
