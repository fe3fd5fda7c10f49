-- Settle: an attempt's partial or final outcome, applied atomically.
--
-- KEYS: 1 attempts zset, 2 record hash, 3 daily hash, 4 daily minutes
--       zset, 5 window key (its start was chosen at admission); then one
--       bucket key per adjustment.
-- ARGV: 1 reserved delta, 2 settled delta, 3 minute, 4 token delta,
--       5 state, 6 tokens given (0/1), 7..11 input, output, cache read,
--       cache write, reasoning, 12 held, 13 cost, 14 final (0/1),
--       15 retention secs, 16 rolling-day minutes, 17 window expiry
--       (Unix s), 18 id, 19 adjustments; then per adjustment: limit,
--       window us, delta.
local now, sec = clock()

local rd, sd = tonumber(ARGV[1]), tonumber(ARGV[2])
if rd ~= 0 or sd ~= 0 then
  local w = redis.call('HMGET', KEYS[5], 'r', 's')
  local r, s = math.max(num(w[1]) + rd, 0), math.max(num(w[2]) + sd, 0)
  -- Past the exact range the amounts are no longer known to the
  -- nano-USD: freeze the window (admit refuses it) rather than round.
  if r > MAXI or s > MAXI then
    r, s = math.min(r, MAXI), math.min(s, MAXI)
    redis.call('HSET', KEYS[5], 'x', '1')
  end
  redis.call('HSET', KEYS[5], 'r', I(r), 's', I(s))
  redis.call('EXPIREAT', KEYS[5], ARGV[17])
end

local td, minute, dayMinutes = tonumber(ARGV[4]), tonumber(ARGV[3]), tonumber(ARGV[16])
local current = math.floor(sec / 60)
if td ~= 0 and minute > current - dayMinutes then
  local field = 'k' .. minute
  local before = num(redis.call('HGET', KEYS[3], field))
  local after = math.max(before + td, 0)
  redis.call('HSET', KEYS[3], field, I(after))
  redis.call('HINCRBY', KEYS[3], 'K', I(after - before))
  redis.call('ZADD', KEYS[4], minute, minute)
  local dayEnd = (current + dayMinutes) * 60 + 60
  redis.call('EXPIREAT', KEYS[3], I(dayEnd))
  redis.call('EXPIREAT', KEYS[4], I(dayEnd))
end

if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'state', ARGV[5], 'held', ARGV[12], 'cost', ARGV[13])
  if ARGV[6] == '1' then
    redis.call('HSET', KEYS[2], 'input_tokens', ARGV[7], 'output_tokens', ARGV[8],
      'cache_read_tokens', ARGV[9], 'cache_write_tokens', ARGV[10], 'reasoning_tokens', ARGV[11])
  end
  if ARGV[14] == '1' then
    local exp = sec + tonumber(ARGV[15])
    redis.call('EXPIREAT', KEYS[2], I(exp))
    redis.call('ZADD', KEYS[1], I(exp), ARGV[18])
  end
end

for i = 1, tonumber(ARGV[19]) do
  local a = 19 + (i - 1) * 3
  local limit, window, delta = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  if limit > 0 and delta ~= 0 and window < 0 then
    -- A sliding window: usage above the estimate counts from now; below
    -- it, the excess is taken back from the newest admissions.
    if delta > 0 then
      slideUsed(KEYS[5 + i], -window, now, true)
      slideAdd(KEYS[5 + i], 's' .. ARGV[18], math.min(delta, limit), -window, now)
    else
      slideRefund(KEYS[5 + i], -delta)
    end
  elseif limit > 0 and delta ~= 0 then
    local tokens = level(KEYS[5 + i], limit, window, now)
    tokens = math.max(-limit, math.min(limit, tokens - delta))
    save(KEYS[5 + i], tokens, limit, window, now)
  end
end
return 1
