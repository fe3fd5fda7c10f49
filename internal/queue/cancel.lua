-- cancel: ARGV P, C, prov, id, otok, ttl_ms. The origin (fenced by its own
-- token) cancels its job; an empty otok is the operator's (CLI) and any
-- origin.
local id, otok, ttl = ARGV[4], ARGV[5], tonumber(ARGV[6])
local h = fields(id)
if not h then return 'missing' end
if otok ~= '' and h.otok ~= otok then return 'lost' end
return cancel_job(id, h, ttl, now_ms())
