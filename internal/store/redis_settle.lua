-- Settle: an attempt's partial or final outcome, applied atomically and
-- at most once: an attempt with a live hold applies only while the hold
-- is there (a final settlement removes it); one without applies only if
-- its id is not in the guard of recently ended attempts (a final
-- settlement adds it). A repeat changes nothing and returns 0.
--
-- KEYS: 1 live holds zset, 2 guard zset (id by expiry), 3 daily hash,
--       4 daily minutes zset, 5 window key (its start was chosen at
--       admission); then one bucket key per adjustment.
-- ARGV: 1 reserved delta, 2 settled delta, 3 minute, 4 token delta,
--       5 recorded (0/1), 6 final (0/1), 7 guard ttl secs, 8 guard max
--       ids, 9 rolling-day minutes, 10 window expiry (Unix s), 11 id,
--       12 adjustments, 13 request delta; then per adjustment: limit,
--       window us, delta.
--
-- The settlement is settle(KEYS, ARGV, now, sec), run by a script of its
-- own (redis.go) or in a batch (redis_batch.lua).
local function settle(KEYS, ARGV, now, sec)

  local id = ARGV[11]
  local final = ARGV[6] == '1'
  if ARGV[5] == '1' then
    if final then
      if redis.call('ZREM', KEYS[1], id) == 0 then return 0 end
      holdsAdd(KEYS[1], -1)
    elseif not redis.call('ZSCORE', KEYS[1], id) then
      return 0
    end
  else
    local seenUntil = redis.call('ZSCORE', KEYS[2], id)
    if seenUntil and tonumber(seenUntil) > sec then return 0 end
    if final then
      redis.call('ZADD', KEYS[2], I(sec + tonumber(ARGV[7])), id)
      -- Bounded: expired ids go (a few at a time), and past the maximum
      -- the oldest.
      local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', sec, 'LIMIT', 0, 16)
      if #old > 0 then redis.call('ZREM', KEYS[2], unpack(old)) end
      local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[8])
      if over > 0 then redis.call('ZPOPMIN', KEYS[2], over) end
    end
  end

  local rd, sd = tonumber(ARGV[1]), tonumber(ARGV[2])
  if rd ~= 0 or sd ~= 0 then
    local w = hmget(KEYS[5], 'r', 's')
    local r, s = math.max(num(w[1]) + rd, 0), math.max(num(w[2]) + sd, 0)
    -- Past the exact range the amounts are no longer known to the
    -- nano-USD: freeze the window (admit refuses it) rather than round.
    if r > MAXI or s > MAXI then
      r, s = math.min(r, MAXI), math.min(s, MAXI)
      hset(KEYS[5], 'x', '1')
    end
    hset(KEYS[5], 'r', I(r), 's', I(s))
    -- A window's expiry is fixed by its start: set when it appears (here
    -- only if it had gone: an admission created it with its expiry).
    if not w[1] and not w[2] then expireat(KEYS[5], ARGV[10]) end
  end

  local td, minute, dayMinutes = tonumber(ARGV[4]), tonumber(ARGV[3]), tonumber(ARGV[9])
  local rq = tonumber(ARGV[13])
  local current = math.floor(sec / 60)
  if (td ~= 0 or rq ~= 0) and minute > current - dayMinutes then
    -- One read and one write: each counter of the minute moves by its
    -- delta, never below 0, and the day's total (K, R) by what the
    -- minute's moved.
    local kf, rf = 'k' .. minute, 'r' .. minute
    local v = hmget(KEYS[3], kf, rf, 'K', 'R')
    local k0, r0 = num(v[1]), num(v[2])
    local k1, r1 = math.max(k0 + td, 0), math.max(r0 + rq, 0)
    hset(KEYS[3], kf, I(k1), rf, I(r1), 'K', I(num(v[3]) + k1 - k0), 'R', I(num(v[4]) + r1 - r0))
    -- The minute is indexed, and the keys live a day past the newest
    -- minute, since its admission counted it; a minute new to the hash
    -- (its admission counted nothing) joins the index here.
    if not v[1] and not v[2] then
      redis.call('ZADD', KEYS[4], minute, minute)
      dfirst[KEYS[4]] = nil
      local dayEnd = (current + dayMinutes) * 60 + 60
      expireat(KEYS[3], I(dayEnd))
      redis.call('EXPIREAT', KEYS[4], I(dayEnd))
    end
  end

  adjust(KEYS, ARGV, 5, 13, tonumber(ARGV[12]), id, now)
  return 1
end
