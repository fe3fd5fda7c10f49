-- Put: store one entry in a partition, evicting the partition's least
-- recently used entries until its bytes fit the budget; all or nothing
-- for the new entry, in one atomic step for the whole fleet.
-- ARGV: 1 prefix, 2 key, 3 partition, 4 value, 5 ttl ms, 6 budget bytes,
--       7 per-entry overhead bytes.
-- Reply: 1 stored, 0 refused (over the budget alone, or more evictions
-- than one call may make).
local P, k, part, v = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ttl, max, overhead = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local lru, sizes, bytes = P .. 'lru:' .. part, P .. 'sizes:' .. part, P .. 'bytes'
local function I(x) return string.format('%d', x) end
local function val(key) return P .. 'e:' .. key .. ':' .. part end
local size = #v + #k + overhead
if size > max then return 0 end
local used = tonumber(redis.call('HGET', bytes, part) or '0') or 0
-- forget drops key from the partition; its bytes leave the total.
local function forget(key)
  local sz = tonumber(redis.call('HGET', sizes, key) or '0') or 0
  redis.call('HDEL', sizes, key)
  redis.call('ZREM', lru, key)
  redis.call('DEL', val(key))
  used = math.max(used - sz, 0)
end
if redis.call('HEXISTS', sizes, k) == 1 then forget(k) end
-- Entries whose value expired still count until forgotten: the least
-- recently used few are checked on every put.
for _, key in ipairs(redis.call('ZRANGE', lru, 0, 7)) do
  if redis.call('EXISTS', val(key)) == 0 then forget(key) end
end
local evicted = 0
while used + size > max do
  local old = redis.call('ZRANGE', lru, 0, 0)
  if #old == 0 then
    used = 0 -- nothing left to count
    break
  end
  forget(old[1])
  evicted = evicted + 1
  if evicted >= 1000 then
    redis.call('HSET', bytes, part, I(used))
    return 0
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', val(k), v, 'PX', I(ttl))
redis.call('ZADD', lru, I(now), k)
redis.call('HSET', sizes, k, I(size))
redis.call('HSET', bytes, part, I(used + size))
return 1
