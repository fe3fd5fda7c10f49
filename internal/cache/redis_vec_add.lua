-- Add: one vector of the semantic index, with its bounds applied in the
-- same atomic step: at most `per` vectors in the group (the oldest go
-- first) and `max` in all.
-- ARGV: 1 prefix, 2 group, 3 key, 4 packed vector, 5 ttl ms, 6 max,
--       7 per-group max.
local P, g, k, v = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ttl, max, per = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local h, z, all = P .. 'sv:' .. g, P .. 'sz:' .. g, P .. 'sall'
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('HSET', h, k, v)
redis.call('ZADD', z, now, k)
redis.call('ZADD', all, now, g .. ':' .. k)
-- The group lives ttl after its last addition; its older vectors may
-- name entries already gone (a lookup then forgets them).
redis.call('PEXPIRE', h, ttl)
redis.call('PEXPIRE', z, ttl)
while redis.call('ZCARD', z) > per do
  local old = redis.call('ZPOPMIN', z)
  redis.call('HDEL', h, old[1])
  redis.call('ZREM', all, g .. ':' .. old[1])
end
local n = 0
while n < 100 and redis.call('ZCARD', all) > max do
  local old = redis.call('ZPOPMIN', all)
  local og, ok = string.match(old[1], '^([^:]*):(.*)$')
  if og then
    redis.call('HDEL', P .. 'sv:' .. og, ok)
    redis.call('ZREM', P .. 'sz:' .. og, ok)
  end
  n = n + 1
end
return 1
