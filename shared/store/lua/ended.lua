-- An attempt ended without a binding and without anything else to stream (a preemption
-- refused or stopped): streamed for the scheduler waiting on it (see emit_ended).
-- ARGV: 1 stream maxlen, 2 pod key, 3 uid, 4 attempt. Returns the entry's resourceVersion.
return emit_ended(ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]))
