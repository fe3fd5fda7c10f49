-- dlq: ARGV P, C, prov, op (retry|drop), id, depth, max_jobs. Retry puts a
-- dead-lettered job back at the head of its tier with a fresh deadline,
-- no origin and zero deliveries; drop deletes it.
local op, id, depth, max_jobs = ARGV[4], ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local h = fields(id)
if not h or h.st ~= 'dead' then return 'missing' end
if op == 'drop' then drop(id, h) return 'dropped' end
if malformed(h) then return 'malformed' end
if redis.call('ZCARD', P .. 'w') >= depth then return 'full' end
if redis.call('ZCARD', P .. 'jobs') >= max_jobs then return 'full' end
local now = now_ms()
redis.call('ZREM', P .. 'dlq', id)
redis.call('HSET', job(id), 'st', 'waiting', 'dlv', '0', 'tok', '', 'org', '', 'otok', '', 'dl', I(now + num(h.to)), 'err', '')
acct_add('dlqb', -num(h.rb))
acct_add('base', num(h.rb))
redis.call('ZADD', P .. 'jobs', I(now), id)
redis.call('ZADD', P .. 'w', h.score, id)
redis.call('PUBLISH', C .. 'wake', PROV)
return 'retried'
