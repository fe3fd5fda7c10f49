-- dlq: ARGV P, op (retry|drop), id, depth, max_jobs. Retry puts a
-- dead-lettered job back at the head of its tier with a fresh deadline,
-- no origin and zero deliveries; drop deletes it.
local op, id, depth, max_jobs = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local h = fields(id)
if not h or h.st ~= 'dead' then return 'missing' end
if op == 'drop' then drop(id, h) return 'dropped' end
if malformed(h) then return 'malformed' end
if redis.call('ZCARD', P .. 'w:' .. h.prov) >= depth then return 'full' end
if redis.call('ZCARD', P .. 'jobs') >= max_jobs then return 'full' end
local now = now_ms()
redis.call('ZREM', P .. 'dlq', id)
redis.call('HSET', job(id), 'st', 'waiting', 'dlv', '0', 'tok', '', 'org', '', 'otok', '', 'dl', I(now + num(h.to)), 'err', '')
acct_add('dlqb', -num(h.rb))
acct_add('base', num(h.rb))
redis.call('ZADD', P .. 'jobs', I(now), id)
redis.call('ZADD', P .. 'w:' .. h.prov, h.score, id)
redis.call('PUBLISH', P .. 'wake', h.prov)
return 'retried'
