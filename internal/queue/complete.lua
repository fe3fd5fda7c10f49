-- complete: ARGV P, C, prov, id, token, gen, terminal, ttl_ms, inline_max. Stores
-- the terminal within the capacity reserved at lease time (the Go side
-- already replaced an oversized one with a fixed error; this refuses it
-- too), releases the lease and tells the origin (inline when small).
local id, tok, gen, env, ttl, inline = ARGV[4], ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local h = fields(id)
local f = fence(h, tok, gen)
if f ~= 'ok' then return f end
if #env > num(h.tb) then return 'too_large' end
local now = now_ms()
unlease(id, h, #env)
finish(id, h, 'done', env, ttl, now)
if #env <= inline then notify(h.org, id, gen, 'T', 0, env) else notify(h.org, id, gen, 'T', 0, '') end
return 'ok'
