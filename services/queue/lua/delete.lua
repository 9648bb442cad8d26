-- Delete: remove pods from whichever queue holds them, lease included.
-- ARGV: count, then pairs key, uid ('' matches any uid). Returns the number removed.
-- What `forget` does per pod, done here once per hash for the whole batch (the queue removes
-- bound pods a stream batch at a time: one HDEL per hash instead of six per pod).
local count = tonumber(ARGV[1])
local removed = 0
local seen, keys, bodies, leased = {}, {}, {}, {}
for i = 1, count do
  local key, uid = ARGV[2 * i], ARGV[2 * i + 1]
  local s = not seen[key] and get_state(key)
  if s and (uid == '' or s[UID] == uid) then
    seen[key] = true
    local loc = locate(key, s)
    if loc == 'i' then
      table.insert(leased, key)  -- end_lease, below
    elseif loc then
      remove_from_queue(key, loc, s)
    end
    table.insert(keys, key)
    table.insert(bodies, body_field(key, s[RV]))
    removed = removed + 1
  end
end
if #leased > 0 then
  bulk('ZREM', K_EXT, leased, 1)
  leases_revoked()
end
bulk('HDEL', K_POD, bodies, 1)
for _, hash in ipairs({K_ST, K_ATT, K_CYC, K_RQ, K_WHY}) do bulk('HDEL', hash, keys, 1) end
bulk('SREM', K_AFF, keys, 1)
stat('deleted', removed)
return removed
