-- Admit: ARGV n, n x (pod key, record), m, m x (usage field, delta).
for i = 1, tonumber(ARGV[1]) do
  redis.call('HSET', KEYS[1], ARGV[2 * i], ARGV[2 * i + 1])
end
local n = tonumber(ARGV[1])
local at = 2 * n + 2
for j = 1, tonumber(ARGV[at]) do
  redis.call('HINCRBY', KEYS[2], ARGV[at + 2 * j - 1], ARGV[at + 2 * j])
end
return n
