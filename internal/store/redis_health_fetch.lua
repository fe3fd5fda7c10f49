-- Health fetch: the fleet's record of each provider, with Redis TIME so
-- the reader turns stamps into ages instead of comparing clocks.
--
-- KEYS: health hashes. Reply: {now_us, {open, close, pause_end, reason}...}
local now = clock()
local out = {now}
for i = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[i], 'o', 'c', 'p', 'r')
  out[i + 1] = {num(v[1]), num(v[2]), num(v[3]), v[4] or ''}
end
return out
