-- enqueue: ARGV P, C, prov, id, tier, timeout_ms, origin, otok, olease_ms,
-- request, depth, max_jobs, max_base, meta_bytes, ep, tenant, stream
-- The depth check and the insert are this one step, so concurrent
-- ingress replicas cannot both take the last slot. Every bound is this
-- provider's queue's.
--
-- Hand-off: when no job waits ahead of this one and a worker stands by in
-- this queue (lease.lua) with room under its fleet-wide limit and the
-- terminal pool, the job is leased to that worker's standing token in this
-- same step and its delivery sent on the worker's channel: the job's path
-- has no wake-up and no lease round trip. Returns {'ok', now, deadline}.
local id, prov, tier = ARGV[4], PROV, tonumber(ARGV[5])
local timeout, org, otok, olease = tonumber(ARGV[6]), ARGV[7], ARGV[8], tonumber(ARGV[9])
local req, depth, max_jobs, max_base = ARGV[10], tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
local meta = tonumber(ARGV[14])
local fmt = redis.call('GET', P .. 'format')
if fmt and fmt ~= '1' then return {'incompatible', fmt} end
if not fmt then redis.call('SET', P .. 'format', '1') end
if redis.call('EXISTS', job(id)) == 1 then return {'exists'} end
local now = now_ms()
local wkey = P .. 'w'
if redis.call('ZCARD', wkey) >= depth then return {'full', 'queue'} end
local rb = #req + meta
-- Retention: finished records past their readback window go first, in a
-- small fixed batch; live jobs are never evicted.
local function reclaim(n)
  local ids = redis.call('ZRANGEBYSCORE', P .. 'done', '-inf', I(now), 'LIMIT', 0, n)
  for _, d in ipairs(ids) do drop(d, fields(d)) end
  return #ids
end
if redis.call('ZCARD', P .. 'jobs') >= max_jobs or acct_num('base') + rb > max_base then
  reclaim(16)
  if redis.call('ZCARD', P .. 'jobs') >= max_jobs then return {'full', 'retained_jobs'} end
  if acct_num('base') + rb > max_base then return {'full', 'retained_bytes'} end
end
if not int(redis.call('GET', P .. 'seq') or '0') then
  redis.log(redis.LOG_WARNING, 'switchboard queue: counter seq was not an integer; restarted from 0')
  redis.call('SET', P .. 'seq', '0')
end
local hand
if timeout > 0 and redis.call('ZCARD', wkey) == 0 then
  local t = redis.call('ZREVRANGEBYSCORE', P .. 'idlex', '+inf', '(' .. I(now), 'LIMIT', 0, 1)
  if #t > 0 then
    local tok = t[1]
    local terms = redis.call('HGET', P .. 'idle', tok) or ''
    local lim, lease, ures, sres, mt, wrk = string.match(terms, '^(%d+) (%d+) (%d+) (%d+) (%d+) (.+)$')
    if not (wrk and int(lim) and int(lease) and int(ures) and int(sres) and int(mt) and #tok <= 64
        and string.match(tok, '^%x+$')) then
      unstand(tok) -- not what a worker writes: never handed anything
    else
      local res = tonumber(ures)
      if ARGV[17] == '1' then res = tonumber(sres) end
      lim = tonumber(lim)
      if (lim == 0 or redis.call('ZCARD', P .. 'p') < lim) and acct_num('term') + res <= tonumber(mt) then
        unstand(tok)
        hand = {tok = tok, wrk = wrk, lease = tonumber(lease), res = res}
      end
    end
  end
end
local seq = redis.call('INCR', P .. 'seq')
local score = (1000 - tier) * 1e12 + (seq % 1e12)
-- A handed job is written leased at once: generation and delivery 1, the
-- terminal capacity reserved (what lease.lua would do).
local st, gen, dlv, tok, wrk, tb = 'waiting', '0', '0', '', '', '0'
if hand then st, gen, dlv, tok, wrk, tb = 'leased', '1', '1', hand.tok, hand.wrk, I(hand.res) end
redis.call('HSET', job(id), 'st', st, 'prov', prov, 'tier', I(tier), 'score', I(score), 'gen', gen,
  'tok', tok, 'wrk', wrk, 'dlv', dlv, 'dl', I(now + timeout), 'to', I(timeout), 'org', org, 'otok', otok,
  'rb', I(rb), 'tb', tb, 'ep', ARGV[15], 'tenant', ARGV[16], 'stream', ARGV[17], 'created', I(now))
redis.call('SET', P .. 'r:' .. id, req)
redis.call('ZADD', P .. 'jobs', I(now), id)
if org ~= '' then redis.call('ZADD', P .. 'origins', I(math.min(now + olease, now + timeout)), id) end
acct_add('base', rb)
if hand then
  redis.call('ZADD', P .. 'leases', I(now + hand.lease), id)
  redis.call('ZADD', P .. 'p', I(now + hand.lease), id)
  acct_add('term', hand.res)
  redis.call('SET', P .. 'hd:' .. tok, id, 'PX', I(hand.lease))
  -- The delivery: '+' (no job id starts so), then the lease's fields as
  -- lease.lua returns them, the request last.
  redis.call('PUBLISH', C .. 'wk:' .. wrk, '+' .. tok .. '\n' .. id .. '\n1\n1\n' .. I(now + timeout) .. '\n' .. I(now) .. '\n' .. req)
else
  redis.call('ZADD', wkey, I(score), id)
  redis.call('PUBLISH', C .. 'wake', prov)
end
return {'ok', I(now), I(now + timeout)}
