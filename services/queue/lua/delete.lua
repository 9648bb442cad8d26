-- Delete: remove pods from whichever queue holds them, lease included.
-- ARGV: count, then pairs key, uid ('' matches any uid). Returns the number removed.
local count = tonumber(ARGV[1])
local removed = 0
for i = 1, count do
  local key, uid = ARGV[2 * i], ARGV[2 * i + 1]
  local s = get_state(key)
  if s and (uid == '' or s[UID] == uid) then
    if forget(key, s) == 'i' then leases_revoked() end
    removed = removed + 1
  end
end
stat('deleted', removed)
return removed
