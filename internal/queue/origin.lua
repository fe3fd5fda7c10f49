-- origin: ARGV P, C, prov, id, otok, olease_ms, ack. The origin renews its claim
-- on a job (never past the job's deadline) and learns its state and
-- generation; with ack=1 it has read the terminal and the record goes.
local id, otok, olease, ack = ARGV[4], ARGV[5], tonumber(ARGV[6]), ARGV[7]
local h = fields(id)
if not h then return {'missing', '0'} end
if h.otok ~= otok then return {'lost', h.gen or '0'} end
if ack == '1' then
  if h.st == 'done' or h.st == 'canceled' then drop(id, h) end
  return {'acked', h.gen}
end
if h.st == 'waiting' or h.st == 'leased' then
  local now = now_ms()
  redis.call('ZADD', P .. 'origins', I(math.min(now + olease, num(h.dl))), id)
end
return {h.st, h.gen}
