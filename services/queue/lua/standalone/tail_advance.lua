-- The informer's tailer lease (services/queue/informer.py): record the applied position,
-- only while holding the lease
-- (a deposed tailer's position would move the cursor past changes the new one has not applied).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local at = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) > at then redis.call('SET', KEYS[2], ARGV[2]) end
return 1
