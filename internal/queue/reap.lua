-- reap: ARGV P, C, prov, batch, max_deliveries, ttl_ms, dlq_max, dlq_bytes,
-- dlq_ttl_ms. One bounded pass: expired leases are requeued (or
-- dead-lettered after max_deliveries; canceled once stream bytes were
-- published, since those reached the client), jobs whose origin went silent are
-- canceled, finished records past readback and DLQ entries past their
-- bounds are reclaimed. Returns the counts, then how many job records and
-- DLQ entries the queue still holds.
local batch, maxd, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local dlq_max, dlq_bytes, dlq_ttl = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local now = now_ms()
local requeued, dead, canceled, reclaimed = 0, 0, 0, 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'leases', '-inf', I(now), 'LIMIT', 0, batch)) do
  local h = fields(id)
  if not h or h.st ~= 'leased' then
    redis.call('ZREM', P .. 'leases', id)
    if h then redis.call('ZREM', P .. 'p', id) end
  elseif malformed(h) then
    -- Corrupted while leased: its worker's fenced calls already fail.
    to_dlq(id, h, 'malformed job record (field ' .. malformed(h) .. ' is not what the queue writes)', ttl, now)
    dead = dead + 1
  elseif h.com == '1' then
    -- Its stream already reached the client, which cannot be given a
    -- second run: the origin ends the stream (R) and the job is canceled
    -- in this same step, so no worker can lease it again.
    notify(h.org, id, h.gen or '0', 'R', 0, '')
    cancel_job(id, h, ttl, now)
    canceled = canceled + 1
  elseif num(h.dlv) >= maxd then
    to_dlq(id, h, 'lease expired on delivery ' .. h.dlv .. ' of ' .. I(maxd) .. ' (worker lost)', ttl, now)
    dead = dead + 1
  else
    unlease(id, h, 0)
    redis.call('HSET', job(id), 'st', 'waiting', 'tok', '', 'err', 'lease expired (worker lost)')
    redis.call('ZADD', P .. 'w', h.score, id)
    notify(h.org, id, h.gen, 'R', 0, '')
    redis.call('PUBLISH', C .. 'wake', PROV)
    requeued = requeued + 1
  end
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'origins', '-inf', I(now), 'LIMIT', 0, batch)) do
  local h = fields(id)
  redis.call('ZREM', P .. 'origins', id)
  if h then
    local st = cancel_job(id, h, ttl, now)
    if st == 'waiting' or st == 'leased' then canceled = canceled + 1 end
  end
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'done', '-inf', I(now), 'LIMIT', 0, batch)) do
  drop(id, fields(id))
  reclaimed = reclaimed + 1
end
-- Standings of workers gone (a live worker renews its own, and its lease
-- calls clear a few), so a queue no worker leases from keeps none.
for _, t in ipairs(redis.call('ZRANGEBYSCORE', P .. 'idlex', '-inf', I(now), 'LIMIT', 0, batch)) do unstand(t) end
local function dlq_drop(id)
  local h = fields(id)
  if h then drop(id, h) else redis.call('ZREM', P .. 'dlq', id) end
  reclaimed = reclaimed + 1
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'dlq', '-inf', I(now - dlq_ttl), 'LIMIT', 0, batch)) do dlq_drop(id) end
local k = 0
while k < batch and (redis.call('ZCARD', P .. 'dlq') > dlq_max or acct_num('dlqb') > dlq_bytes) do
  local old = redis.call('ZRANGE', P .. 'dlq', 0, 0)
  if #old == 0 then break end
  dlq_drop(old[1])
  k = k + 1
end
return {requeued, dead, canceled, reclaimed, redis.call('ZCARD', P .. 'jobs'), redis.call('ZCARD', P .. 'dlq')}
