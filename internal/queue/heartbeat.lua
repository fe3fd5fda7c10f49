-- heartbeat: ARGV P, id, token, gen, lease_ms. Extends a live delivery.
local id, tok, gen, lease = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local h = fields(id)
local f = fence(h, tok, gen)
if f ~= 'ok' then return f end
local now = now_ms()
redis.call('ZADD', P .. 'leases', I(now + lease), id)
redis.call('ZADD', P .. 'p:' .. h.prov, I(now + lease), id)
return 'ok'
