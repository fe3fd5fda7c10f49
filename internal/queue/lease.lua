-- lease: ARGV P, C, prov, worker, token, lease_ms, unary_reserve,
-- stream_reserve, max_term, ttl_ms, limit (the provider's fleet-wide
-- concurrency, 0 = none). Takes the best waiting job of this provider's
-- queue if it has room, reserving its terminal capacity before dispatch.
-- Returns {} when nothing can be leased, {'skip', id, why} for a record
-- it had to drop or dead-letter, else the delivery.
local wrk, tok, lease = ARGV[4], ARGV[5], tonumber(ARGV[6])
local ures, sres, max_term, ttl = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local lim = tonumber(ARGV[11])
local wkey = P .. 'w'
if lim ~= 0 and redis.call('ZCARD', P .. 'p') >= lim then return {} end
local top = redis.call('ZRANGE', wkey, 0, 0)
if #top == 0 then return {} end
local now = now_ms()
local id = top[1]
local h = fields(id)
if not h or h.st ~= 'waiting' then
  -- A foreign or stale entry: never dispatched.
  redis.call('ZREM', wkey, id)
  return {'skip', id, 'malformed job record'}
end
local bad = malformed(h)
if bad then
  -- A record no transition can compute with: to the DLQ (its origin is
  -- told at once), never dispatched, and the queue behind it keeps
  -- moving.
  redis.call('ZREM', wkey, id)
  local why = 'malformed job record (field ' .. bad .. ' is not what the queue writes)'
  to_dlq(id, h, why, ttl, now)
  return {'skip', id, why .. '; dead-lettered'}
end
if tonumber(h.dl) <= now then
  finish(id, h, 'done', '{"kind":"expired","status":504}\n', ttl, now)
  redis.call('ZREM', wkey, id)
  notify(h.org, id, h.gen, 'T', 0, '{"kind":"expired","status":504}\n')
  return {'skip', id, 'deadline passed while waiting'}
end
local res = ures
if h.stream == '1' then res = sres end
if acct_num('term') + res > max_term then return {} end
local gen = redis.call('HINCRBY', job(id), 'gen', 1)
local dlv = redis.call('HINCRBY', job(id), 'dlv', 1)
redis.call('ZREM', wkey, id)
redis.call('HSET', job(id), 'st', 'leased', 'tok', tok, 'wrk', wrk, 'tb', I(res))
redis.call('ZADD', P .. 'leases', I(now + lease), id)
redis.call('ZADD', P .. 'p', I(now + lease), id)
acct_add('term', res)
local req = redis.call('GET', P .. 'r:' .. id) or ''
return {'job', id, I(gen), I(dlv), h.dl, I(now), PROV, req}
