-- requeue: ARGV P, C, prov, id, token, gen, why, max_deliveries, ttl_ms,
-- unstarted. A worker gives a delivery back (it cannot route the job, or
-- is stopping); after max_deliveries the job is dead-lettered instead.
-- unstarted=1: a handed delivery the worker never started (no free slot,
-- or stopping): it does not count as a delivery.
local id, tok, gen, why, maxd, ttl = ARGV[4], ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local h = fields(id)
local f = fence(h, tok, gen)
if f ~= 'ok' then return f end
local now = now_ms()
if ARGV[10] == '1' then
  redis.call('HINCRBY', job(id), 'dlv', -1)
elseif num(h.dlv) >= maxd then
  to_dlq(id, h, why, ttl, now)
  return 'dead'
end
unlease(id, h, 0)
redis.call('HSET', job(id), 'st', 'waiting', 'err', why)
redis.call('ZADD', P .. 'w', h.score, id)
notify(h.org, id, gen, 'R', 0, '')
redis.call('PUBLISH', C .. 'wake', PROV)
return 'requeued'
