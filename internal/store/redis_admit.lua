-- Admit: one attempt, decided and applied atomically (all or nothing).
-- Order of checks as in local.go: rate buckets (each debit's penalty, then
-- its level), the rolling-day count, the live-hold capacity, the spend
-- reservation. A refusal writes nothing but reclaimed holds.
--
-- KEYS: 1 the ledger's live holds zset (id by expiry), 2 daily hash, 3
--       daily minutes zset, 4 window key prefix (the window start is
--       appended here: it comes from Redis TIME); then per debit its bucket
--       and penalty keys. All share one hash tag; in a cluster, the buckets
--       of other owners go in calls of their own, without the ledger.
-- ARGV: 1 id, 2 debits, 3 daily limit (-1 none), 4 count (0/1: one more
--       request of the day), 5 estimated tokens, 6 window secs, 7
--       budgeted (0/1), 8 budget, 9 hold, 10 hold remaining (0/1), 11 max
--       live holds, 12 retention secs, 13 rolling-day minutes, 14 reclaim
--       batch, 15 ledger (0: KEYS 1-4 are placeholders, and only the
--       buckets are decided); then per debit: limit (-1 unlimited), window
--       us, cost, grouped.
-- The decision is admit(KEYS, ARGV, now, sec), run by a script of its own
-- (redis.go) or in a batch (redis_batch.lua).
-- Reply: {refused, index, wait_us, now_us, minute, window_start, held,
--         spent, recorded, day_requests (after this one), oldest_minute,
--         {limit, remaining, reset_us, wait_us, penalized}, {{limit,
--         remaining, reset_us} per debit}}
local function admit(KEYS, ARGV, now, sec)
  local n = tonumber(ARGV[2])
  local minute = math.floor(sec / 60)
  local secs = tonumber(ARGV[6])
  local ws = windowStart(sec, secs)
  local dayMinutes = tonumber(ARGV[13])

  local function reply(code, index, wait, held, spent, recorded, reqs, oldest, refusal, snaps)
    return {code, index, wait, now, minute, ws, held, spent, recorded, reqs, oldest, refusal, snaps}
  end

  local ledger = ARGV[15] == '1'

  -- reclaim drops live holds past their expiry, a batch at a time. They
  -- are what crashed attempts left (a settled attempt removes its own), so
  -- it runs when the holds are full and once a minute per ledger (at the
  -- first admission counted in a new minute), not on every decision.
  local function reclaim()
    local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', sec, 'LIMIT', 0, tonumber(ARGV[14]))
    if #gone > 0 then holdsAdd(KEYS[1], -redis.call('ZREM', KEYS[1], unpack(gone))) end
  end

  -- debit applies checked debits and returns their snapshots.
  local function debit(ds)
    local snaps = {}
    for i, d in ipairs(ds) do
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
    return snaps
  end

  -- Rate buckets: every one is checked before any is debited.
  local debits, penalties = {}, {}
  for i = 1, n do
    local a = 15 + (i - 1) * 4
    local d = {limit = tonumber(ARGV[a + 1]), window = tonumber(ARGV[a + 2]), cost = tonumber(ARGV[a + 3]),
               bucket = KEYS[4 + (i - 1) * 2 + 1], penalty = KEYS[4 + (i - 1) * 2 + 2]}
    debits[i] = d
    if d.window < 0 then d.window, d.sliding = -d.window, true end
    if ARGV[a + 4] == '1' then
      -- A provider's RPM and TPM buckets share one penalty: read it once.
      local untilUs = penalties[d.penalty]
      if not untilUs then
        untilUs = num(sget(d.penalty))
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

  if not ledger then
    return reply(0, 0, 0, 0, 0, 0, 0, 0, {}, debit(debits))
  end

  -- The rolling day.
  local reqs, toks, oldest, curR, curK = daily(KEYS[2], KEYS[3], minute - dayMinutes, minute)
  local dailyLimit = tonumber(ARGV[3])
  local count = tonumber(ARGV[4])
  if count > 0 and dailyLimit >= 0 and reqs + 1 > dailyLimit then
    local wait = 86400 * 1000000
    if reqs > 0 then wait = math.max((oldest + dayMinutes) * 60 * 1000000 - now, 1000000) end
    return reply(2, 0, wait, 0, 0, 0, reqs, oldest, {}, {})
  end

  -- The live holds and the spend window. Only a budgeted attempt takes a
  -- live hold; when they are all taken it is refused (fail closed).
  local budgeted = ARGV[7] == '1'
  if budgeted then
    local maxHolds = tonumber(ARGV[11])
    if zcard(KEYS[1]) >= maxHolds then
      reclaim()
      if zcard(KEYS[1]) >= maxHolds then
        return reply(4, 0, 0, 0, 0, 0, reqs, oldest, {}, {})
      end
    end
  end
  local wkey = KEYS[4] .. ':' .. ws
  local w = hmget(wkey, 'r', 's', 'x')
  local reserved, settled = num(w[1]), num(w[2])
  local spent = reserved + settled
  local hold = math.max(tonumber(ARGV[9]), 0)
  if budgeted then
    local budget = tonumber(ARGV[8])
    if ARGV[10] == '1' then hold = budget - spent end
    -- x marks a window whose liabilities overflowed the exact range: it
    -- stays refused, since what was lost cannot be released again.
    if w[3] or budget == 0 or (ARGV[10] == '1' and hold <= 0) or hold > budget - spent then
      local wait = math.max((ws + secs) * 1000000 - now, 1000000)
      return reply(3, 0, wait, 0, spent, 0, reqs, oldest, {}, {})
    end
  end

  -- Every check passed: apply everything.
  local snaps = debit(debits)
  if budgeted then
    -- The live hold is the zset entry alone: its settlement removes it
    -- (and applies only if it did), so it needs no record of amounts.
    holdsAdd(KEYS[1], redis.call('ZADD', KEYS[1], I(math.max(sec, ws + secs) + tonumber(ARGV[12])), ARGV[1]))
  end
  -- Day counters: one HSET for the minute and the totals; the minute's
  -- index entry and the keys' expiry only when the minute is new.
  local est = math.max(tonumber(ARGV[5]), 0)
  if count > 0 or est > 0 then
    hset(KEYS[2], 'r' .. minute, I(num(curR) + count), 'k' .. minute, I(num(curK) + est),
      'R', I(reqs + count), 'K', I(toks + est))
    if not curR then
      reclaim()
      redis.call('ZADD', KEYS[3], minute, minute)
      dfirst[KEYS[3]] = nil
      local dayEnd = (minute + dayMinutes) * 60 + 60
      expireat(KEYS[2], I(dayEnd))
      redis.call('EXPIREAT', KEYS[3], I(dayEnd))
    end
  end
  reqs = reqs + count
  if hold > 0 then
    local r = reserved + hold
    if r > MAXI then
      r = MAXI
      hset(wkey, 'x', '1')
    end
    hset(wkey, 'r', I(r))
    -- A window's expiry is fixed by its start: set once, when it appears.
    if not w[1] and not w[2] then expireat(wkey, I(ws + secs + 2 * 86400)) end
  end
  if reqs > 0 and oldest == 0 then oldest = minute end
  return reply(0, 0, 0, hold, spent + hold, budgeted and 1 or 0, reqs, oldest, {}, snaps)
end
