-- Usage: a tenant's rolling day and current budget window. It reserves
-- nothing; it only drops minutes that already left the day.
--
-- KEYS: 1 daily hash, 2 daily minutes zset, 3 window key prefix.
-- ARGV: 1 rolling-day minutes, 2 window secs.
-- Reply: {requests, tokens, oldest_minute, window_start, reserved, settled}
local _, sec = clock()
local reqs, toks, oldest = daily(KEYS[1], KEYS[2], math.floor(sec / 60) - tonumber(ARGV[1]))
local ws = windowStart(sec, tonumber(ARGV[2]))
local w = redis.call('HMGET', KEYS[3] .. ':' .. ws, 'r', 's')
flush()
return {reqs, toks, oldest, ws, num(w[1]), num(w[2])}
