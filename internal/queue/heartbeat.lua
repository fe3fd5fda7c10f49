-- heartbeat: ARGV P, C, prov, id, token, gen, lease_ms. Extends a live
-- delivery.
local id, tok, gen, lease = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
local h = fields(id)
local f = fence(h, tok, gen)
if f ~= 'ok' then return f end
local now = now_ms()
redis.call('ZADD', P .. 'leases', I(now + lease), id)
redis.call('ZADD', P .. 'p', I(now + lease), id)
return 'ok'
