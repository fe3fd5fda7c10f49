-- publish: ARGV P, id, token, gen, kind, seq, payload. Sends one result
-- message to the origin only while this delivery still owns the job.
local id, tok, gen = ARGV[2], ARGV[3], ARGV[4]
local h = fields(id)
local f = fence(h, tok, gen)
if f ~= 'ok' then return f end
notify(h.org, id, gen, ARGV[5], ARGV[6], ARGV[7])
return 'ok'
