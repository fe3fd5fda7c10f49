-- lease: ARGV P, C, prov, worker, token, lease_ms, unary_reserve,
-- stream_reserve, max_term, ttl_ms, limit (the provider's fleet-wide
-- concurrency, 0 = none), stand_ms, mode (lease|look). Takes the best
-- waiting job of this provider's queue if it has room, reserving its
-- terminal capacity before dispatch. Returns {} when nothing can be
-- leased, {'skip', id, why} for a record it had to drop or dead-letter,
-- else the delivery. Mode look leases nothing: it returns {'look',
-- waiting, leased, handed} (handed 1: a job waits for this token).
--
-- Standing by: a worker's token is its standing token in this queue until
-- a delivery uses it. With stand_ms > 0, a call that leases nothing leaves
-- the worker standing by under it for stand_ms (its lease terms kept with
-- it), and an enqueue that finds no job waiting ahead of its own leases
-- the job to that token in the same step and sends the delivery on the
-- worker's channel (enqueue.lua). A later call with the token returns such
-- a delivery first (again, while it lasts: the worker runs a delivery
-- once, whichever way it came), so a lost message costs a poll, never
-- the job.
local wrk, tok, lease = ARGV[4], ARGV[5], tonumber(ARGV[6])
local ures, sres, max_term, ttl = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local lim, stand, look = tonumber(ARGV[11]), tonumber(ARGV[12]) or 0, ARGV[13] == 'look'
local wkey = P .. 'w'
local now = now_ms()
-- A token that was handed a job is spent: the worker stands by under a
-- new one, and a call still carrying it (sent before the hand-off reached
-- the worker) never stands it by again. The record of the hand-off lasts
-- the lease time.
local hid = redis.call('GET', P .. 'hd:' .. tok)
if hid then
  local h = fields(hid)
  if h and h.st == 'leased' and h.tok == tok and h.wrk == wrk and not malformed(h) then
    if look then return {'look', redis.call('ZCARD', wkey), redis.call('ZCARD', P .. 'p'), 1} end
    return {'job', hid, h.gen, h.dlv, h.dl, I(now), PROV, redis.call('GET', P .. 'r:' .. hid) or ''}
  end
end
unstand(tok)
-- idle stands the worker by under its token (when asked to and the token
-- is not spent) and reports nothing leased; a few standings of workers
-- gone are cleared on the way.
local function idle()
  if stand > 0 and not hid then
    redis.call('HSET', P .. 'idle', tok, I(lim) .. ' ' .. I(lease) .. ' ' .. I(ures) .. ' ' .. I(sres) .. ' ' .. I(max_term) .. ' ' .. wrk)
    redis.call('ZADD', P .. 'idlex', I(now + stand), tok)
    for _, t in ipairs(redis.call('ZRANGEBYSCORE', P .. 'idlex', '-inf', I(now), 'LIMIT', 0, 8)) do unstand(t) end
  end
  if look then return {'look', redis.call('ZCARD', wkey), redis.call('ZCARD', P .. 'p'), 0} end
  return {}
end
if look then return idle() end
if lim ~= 0 and redis.call('ZCARD', P .. 'p') >= lim then return idle() end
local top = redis.call('ZRANGE', wkey, 0, 0)
if #top == 0 then return idle() end
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
if acct_num('term') + res > max_term then return idle() end
local gen = redis.call('HINCRBY', job(id), 'gen', 1)
local dlv = redis.call('HINCRBY', job(id), 'dlv', 1)
redis.call('ZREM', wkey, id)
redis.call('HSET', job(id), 'st', 'leased', 'tok', tok, 'wrk', wrk, 'tb', I(res))
redis.call('ZADD', P .. 'leases', I(now + lease), id)
redis.call('ZADD', P .. 'p', I(now + lease), id)
acct_add('term', res)
local req = redis.call('GET', P .. 'r:' .. id) or ''
return {'job', id, I(gen), I(dlv), h.dl, I(now), PROV, req}
