-- Admit: one attempt, decided and applied atomically (all or nothing).
-- Order of checks as in local.go: rate buckets (each debit's penalty, then
-- its level), the rolling-day count, the attempt-record capacity, the
-- spend reservation. A refusal writes nothing but reclaimed records.
--
-- KEYS: 1 attempts zset (id by expiry), 2 record hash, 3 daily hash,
--       4 daily minutes zset, 5 window key prefix (the window start is
--       appended here: it comes from Redis TIME); then per debit its
--       bucket and penalty keys.
-- ARGV: 1 id, 2 tenant, 3 provider, 4 model, 5 debits, 6 daily limit
--       (-1 none), 7 estimated tokens, 8 window secs, 9 budgeted (0/1),
--       10 budget, 11 hold, 12 hold remaining (0/1), 13 max retained,
--       14 retention secs, 15 rolling-day minutes, 16 reclaim batch;
--       then per debit: limit (-1 unlimited), window us, cost, grouped.
-- Reply: {refused, index, wait_us, now_us, minute, window_start, held,
--         spent, recorded, day_requests, oldest_minute,
--         {limit, remaining, reset_us, wait_us, penalized}, {{limit,
--         remaining, reset_us} per debit}}
local now, sec = clock()
local n = tonumber(ARGV[5])
local minute = math.floor(sec / 60)
local secs = tonumber(ARGV[8])
local ws = windowStart(sec, secs)
local dayMinutes = tonumber(ARGV[15])

local function reply(code, index, wait, held, spent, recorded, reqs, oldest, refusal, snaps)
  return {code, index, wait, now, minute, ws, held, spent, recorded, reqs, oldest, refusal, snaps}
end

local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', sec, 'LIMIT', 0, tonumber(ARGV[16]))
if #gone > 0 then redis.call('ZREM', KEYS[1], unpack(gone)) end

-- Rate buckets: every one is checked before any is debited.
local debits, penalties = {}, {}
for i = 1, n do
  local a = 16 + (i - 1) * 4
  local d = {limit = tonumber(ARGV[a + 1]), window = tonumber(ARGV[a + 2]), cost = tonumber(ARGV[a + 3]),
             bucket = KEYS[5 + (i - 1) * 2 + 1], penalty = KEYS[5 + (i - 1) * 2 + 2]}
  debits[i] = d
  if d.window < 0 then d.window, d.sliding = -d.window, true end
  if ARGV[a + 4] == '1' then
    -- A provider's RPM and TPM buckets share one penalty: read it once.
    local untilUs = penalties[d.penalty]
    if not untilUs then
      untilUs = num(redis.call('GET', d.penalty))
      penalties[d.penalty] = untilUs
    end
    if untilUs > now then
      local s = {d.limit, 0, 0, untilUs - now, 1}
      if d.limit > 0 and d.sliding then
        local used, oldest = slideUsed(d.bucket, d.window, now, false)
        s[3] = slideSnap(used, oldest, d.limit, d.window, now)[3]
      elseif d.limit > 0 then
        local sn = snap(level(d.bucket, d.limit, d.window, now), d.limit, d.window)
        s[3] = sn[3]
      elseif d.limit == 0 then
        s[3] = d.window
      end
      return reply(1, i - 1, untilUs - now, 0, 0, 0, 0, 0, s, {})
    end
  end
  if d.limit == 0 then
    return reply(1, i - 1, d.window, 0, 0, 0, 0, 0, {0, 0, d.window, d.window, 0}, {})
  end
  if d.limit > 0 and d.sliding then
    d.cost = math.min(math.max(d.cost, 0), d.limit)
    d.used, d.oldest = slideUsed(d.bucket, d.window, now, true)
    if d.used + d.cost > d.limit then
      local wait = slideWait(d.bucket, d.window, now, d.used + d.cost - d.limit)
      local sn = slideSnap(d.used, d.oldest, d.limit, d.window, now)
      return reply(1, i - 1, wait, 0, 0, 0, 0, 0, {sn[1], sn[2], sn[3], wait, 0}, {})
    end
  elseif d.limit > 0 then
    d.cost = math.min(math.max(d.cost, 0), d.limit)
    d.tokens = level(d.bucket, d.limit, d.window, now)
    if d.tokens < d.cost then
      local wait = math.max(math.ceil((d.cost - d.tokens) * d.window / d.limit), 1)
      local sn = snap(d.tokens, d.limit, d.window)
      return reply(1, i - 1, wait, 0, 0, 0, 0, 0, {sn[1], sn[2], sn[3], wait, 0}, {})
    end
  end
end

-- The rolling day.
local reqs, toks, oldest, curR, curK = daily(KEYS[3], KEYS[4], minute - dayMinutes, minute)
local dailyLimit = tonumber(ARGV[6])
if dailyLimit >= 0 and reqs + 1 > dailyLimit then
  local wait = 86400 * 1000000
  if reqs > 0 then wait = math.max((oldest + dayMinutes) * 60 * 1000000 - now, 1000000) end
  return reply(2, 0, wait, 0, 0, 0, reqs, oldest, {}, {})
end

-- Attempt records and the spend window.
local budgeted = ARGV[9] == '1'
local recorded = redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[13])
if not recorded and budgeted then
  return reply(4, 0, 0, 0, 0, 0, reqs, oldest, {}, {})
end
local wkey = KEYS[5] .. ':' .. ws
local w = redis.call('HMGET', wkey, 'r', 's', 'x')
local reserved, settled = num(w[1]), num(w[2])
local spent = reserved + settled
local hold = math.max(tonumber(ARGV[11]), 0)
if budgeted then
  local budget = tonumber(ARGV[10])
  if ARGV[12] == '1' then hold = budget - spent end
  -- x marks a window whose liabilities overflowed the exact range: it
  -- stays refused, since what was lost cannot be released again.
  if w[3] or budget == 0 or (ARGV[12] == '1' and hold <= 0) or hold > budget - spent then
    local wait = math.max((ws + secs) * 1000000 - now, 1000000)
    return reply(3, 0, wait, 0, spent, 0, reqs, oldest, {}, {})
  end
end

-- Every check passed: apply everything.
local snaps = {}
for i, d in ipairs(debits) do
  if d.limit > 0 and d.sliding then
    slideAdd(d.bucket, ARGV[1], d.cost, d.window, now)
    snaps[i] = slideSnap(d.used + d.cost, d.oldest or now, d.limit, d.window, now)
  elseif d.limit > 0 then
    local left = d.tokens - d.cost
    save(d.bucket, left, d.limit, d.window, now)
    snaps[i] = snap(left, d.limit, d.window)
  else
    snaps[i] = {-1, 0, 0}
  end
end
local retention = tonumber(ARGV[14])
if recorded then
  local exp = sec + retention
  if budgeted then exp = math.max(exp, ws + secs + retention) end
  redis.call('HSET', KEYS[2], 'tenant', ARGV[2], 'provider', ARGV[3], 'model', ARGV[4],
    'created_us', I(now), 'minute', I(minute), 'est_tokens', ARGV[7], 'budgeted', ARGV[9],
    'window_secs', ARGV[8], 'window_start', I(ws), 'held', I(hold), 'cost', '0', 'state', 'open')
  redis.call('EXPIREAT', KEYS[2], I(exp))
  redis.call('ZADD', KEYS[1], I(exp), ARGV[1])
end
-- Day counters: one HSET for the minute and the totals; the minute's
-- index entry and the keys' expiry only when the minute is new.
local est = math.max(tonumber(ARGV[7]), 0)
redis.call('HSET', KEYS[3], 'r' .. minute, I(num(curR) + 1), 'k' .. minute, I(num(curK) + est),
  'R', I(reqs + 1), 'K', I(toks + est))
if not curR then
  redis.call('ZADD', KEYS[4], minute, minute)
  local dayEnd = (minute + dayMinutes) * 60 + 60
  redis.call('EXPIREAT', KEYS[3], I(dayEnd))
  redis.call('EXPIREAT', KEYS[4], I(dayEnd))
end
if hold > 0 then
  local r = reserved + hold
  if r > MAXI then
    r = MAXI
    redis.call('HSET', wkey, 'x', '1')
  end
  redis.call('HSET', wkey, 'r', I(r))
  -- A window's expiry is fixed by its start: set once, when it appears.
  if not w[1] and not w[2] then redis.call('EXPIREAT', wkey, I(ws + secs + 2 * 86400)) end
end
if reqs == 0 then oldest = minute end
return reply(0, 0, 0, hold, spent + hold, recorded and 1 or 0, reqs, oldest, {}, snaps)
