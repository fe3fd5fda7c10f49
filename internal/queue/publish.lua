-- publish: ARGV P, id, token, gen, kind, seq, payload. Sends one result
-- message to the origin only while this delivery still owns the job.
local id, tok, gen = ARGV[2], ARGV[3], ARGV[4]
local h = fields(id)
local f = fence(h, tok, gen)
if f ~= 'ok' then return f end
-- A stream's head or bytes reach the client from here on: a lost worker
-- can no longer be replaced invisibly, so the reaper cancels, not requeues.
if (ARGV[5] == 'H' or ARGV[5] == 'C') and h.com ~= '1' then
  redis.call('HSET', job(id), 'com', '1')
end
notify(h.org, id, gen, ARGV[5], ARGV[6], ARGV[7])
return 'ok'
