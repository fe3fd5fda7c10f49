-- Get: an entry's value, and its use noted in its partition's LRU.
-- ARGV: 1 prefix, 2 key, 3 partition.
-- Reply: the value, or false.
local P, k, part = ARGV[1], ARGV[2], ARGV[3]
local v = redis.call('GET', P .. 'e:' .. k .. ':' .. part)
if not v then return false end
local t = redis.call('TIME')
redis.call('ZADD', P .. 'lru:' .. part, 'XX', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), k)
return v
