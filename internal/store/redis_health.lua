-- Health publish: a provider's circuit opened or closed, or it was
-- quota-paused, as one replica saw it. Every event gets a stamp from Redis
-- TIME (microseconds, strictly increasing per provider) so replicas order
-- events without trusting their own clocks.
--
-- KEYS: 1 health hash (o: stamp of the last open, c: of the last close,
--       n: last stamp, p: pause end us, r: pause reason).
-- ARGV: 1 kind (open, close, pause), 2 pause us, 3 reason, 4 ttl ms.
-- Reply: {stamp, now_us}
local now = clock()
local k = KEYS[1]
local stamp = math.max(now, num(redis.call('HGET', k, 'n')) + 1)
local ttl = tonumber(ARGV[4])
if ARGV[1] == 'pause' then
  local untilUs = now + tonumber(ARGV[2])
  if untilUs > num(redis.call('HGET', k, 'p')) then
    redis.call('HSET', k, 'p', I(untilUs), 'r', ARGV[3])
  end
  ttl = math.max(ttl, math.ceil(tonumber(ARGV[2]) / 1000) + 1000)
else
  local field = 'o'
  if ARGV[1] == 'close' then field = 'c' end
  redis.call('HSET', k, field, I(stamp), 'n', I(stamp))
end
-- Extend the record's life, never shorten it (a pause may outlast a
-- later open's ttl).
if redis.call('PTTL', k) < ttl then redis.call('PEXPIRE', k, I(ttl)) end
return {stamp, now}
