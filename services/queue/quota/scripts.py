"""The Lua scripts of quota admission: each admission and each release is one script over
the quota keys (`<prefix>{quota}:admitted`, `:usage`), so usage in Redis is always the sum of
the admitted pods' charges."""

from __future__ import annotations

COMMIT = """
for i = 1, tonumber(ARGV[1]) do
  redis.call('HSET', KEYS[1], ARGV[2 * i], ARGV[2 * i + 1])
end
local n = tonumber(ARGV[1])
local at = 2 * n + 2
for j = 1, tonumber(ARGV[at]) do
  redis.call('HINCRBY', KEYS[2], ARGV[at + 2 * j - 1], ARGV[at + 2 * j])
end
return n
"""
"""Admit: ARGV n, n x (pod key, record), m, m x (usage field, delta)."""

RELEASE = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local rec = cmsgpack.unpack(raw)
if ARGV[2] ~= '' and rec.uid ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
for field, amount in pairs(rec.charge) do
  redis.call('HINCRBY', KEYS[2], field, -amount)
end
return 1
"""
"""Release one pod's charge (only the life with that uid, when given)."""
