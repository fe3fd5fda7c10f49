-- publish: ARGV P, C, prov, id, token, gen, kind, seq, payload. Sends one result
-- message to the origin only while this delivery still owns the job.
local id, tok, gen = ARGV[4], ARGV[5], ARGV[6]
local h = fields(id)
local f = fence(h, tok, gen)
if f ~= 'ok' then return f end
-- A stream's head or bytes reach the client from here on: a lost worker
-- can no longer be replaced invisibly, so the reaper cancels, not requeues.
if (ARGV[7] == 'H' or ARGV[7] == 'C') and h.com ~= '1' then
  redis.call('HSET', job(id), 'com', '1')
end
notify(h.org, id, gen, ARGV[7], ARGV[8], ARGV[9])
return 'ok'
