-- Penalize: refuse a penalty group's debits for a while. The caller gives
-- the duration, not its own deadline, so the end is set on Redis TIME; a
-- new penalty never shortens a running one.
--
-- KEYS: 1 penalty key. ARGV: 1 duration us.
local now = clock()
local untilUs = now + tonumber(ARGV[1])
if untilUs > num(redis.call('GET', KEYS[1])) then
  redis.call('SET', KEYS[1], I(untilUs), 'PX', I(math.ceil(tonumber(ARGV[1]) / 1000) + 1))
end
return 1
