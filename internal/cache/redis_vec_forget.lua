-- Forget: drop one vector of the semantic index.
-- ARGV: 1 prefix, 2 group, 3 key.
local P, g, k = ARGV[1], ARGV[2], ARGV[3]
redis.call('HDEL', P .. 'sv:' .. g, k)
redis.call('ZREM', P .. 'sz:' .. g, k)
redis.call('ZREM', P .. 'sall', g .. ':' .. k)
return 1
