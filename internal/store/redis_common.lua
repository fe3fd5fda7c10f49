-- Helpers prepended to every script of redis.go (one script = one atomic
-- decision; Lua has no includes, so the Go side concatenates).
--
-- Numbers: Lua numbers are doubles, exact for integers up to 2^53. Every
-- counter written here (nano-USD, tokens, microseconds of Redis TIME) stays
-- within that range; money that would leave it freezes its window instead
-- of losing precision. Integers are written with %d, never with Lua's
-- default 14-digit tostring; bucket levels are packed doubles.
local MAXI = 9007199254740992

local function I(x) return string.format('%d', x) end
local function num(v) return tonumber(v) or 0 end

-- clock reads Redis TIME: microseconds, and whole seconds. Windows and
-- buckets follow the server's clock, so host clock skew between replicas
-- changes nothing.
local function clock()
  local t = redis.call('TIME')
  local s = tonumber(t[1])
  return s * 1000000 + tonumber(t[2]), s
end

-- A bucket is one string: three little-endian doubles (tokens, last
-- update in us, capacity), packed with the struct library Redis embeds.
-- One GET and one SET PX per bucket, and doubles round-trip exactly.

-- level is a bucket's tokens at now (a missing bucket is full), as the
-- in-process limit.Memory computes it: continuous refill of limit per
-- window, capped at limit; a changed limit keeps what was consumed.
local function level(key, limit, window, now)
  local v = redis.call('GET', key)
  if not v then return limit end
  local tokens, last, cap = struct.unpack('<ddd', v)
  if cap ~= limit then tokens = limit - (cap - tokens) end
  local el = now - last
  if el > 0 then tokens = tokens + el * limit / window end
  if tokens > limit then tokens = limit end
  return tokens
end

-- save writes a bucket; it is full again two windows after its last use
-- at the latest (debt is bounded by one capacity), so it may expire then.
local function save(key, tokens, limit, window, now)
  redis.call('SET', key, struct.pack('<ddd', tokens, now, limit), 'PX', I(math.ceil(2 * window / 1000) + 1000))
end

-- snap is {limit, remaining, reset_us} of a limited bucket.
local function snap(tokens, limit, window)
  local rem = math.floor(tokens)
  if rem < 0 then rem = 0 end
  local reset = math.ceil((limit - tokens) * window / limit)
  if reset < 0 then reset = 0 end
  return {limit, rem, reset}
end

-- daily prunes the minutes that left the rolling day (minute <= floor)
-- from the tenant's totals and returns requests, tokens, the oldest minute
-- still counted (0 when none), and the requests and tokens (false when
-- absent) of minute m. dkey holds r<minute>, k<minute> and the totals R,
-- K; zkey orders the minutes. Pruning is looked for only when the oldest
-- minute has left, so a steady caller pays two reads.
local function daily(dkey, zkey, floor, m)
  local first = redis.call('ZRANGE', zkey, 0, 0)
  if first[1] and tonumber(first[1]) <= floor then
    local old = redis.call('ZRANGEBYSCORE', zkey, '-inf', floor)
    local r, k = 0, 0
    for _, x in ipairs(old) do
      local v = redis.call('HMGET', dkey, 'r' .. x, 'k' .. x)
      r, k = r + num(v[1]), k + num(v[2])
      redis.call('HDEL', dkey, 'r' .. x, 'k' .. x)
    end
    redis.call('HINCRBY', dkey, 'R', I(-r))
    redis.call('HINCRBY', dkey, 'K', I(-k))
    redis.call('ZREMRANGEBYSCORE', zkey, '-inf', floor)
    first = redis.call('ZRANGE', zkey, 0, 0)
  end
  local v = redis.call('HMGET', dkey, 'R', 'K', 'r' .. (m or 0), 'k' .. (m or 0))
  return num(v[1]), num(v[2]), num(first[1]), v[3], v[4]
end

-- windowStart is the start of the tumbling window of secs holding sec.
local function windowStart(sec, secs)
  return sec - ((sec % secs) + secs) % secs
end

-- A sliding window (limits.window: sliding; its window argument comes
-- negative) is a zset of admissions (member "<id>:<cost>", score the
-- admission's µs) and their total at key..':n'; an admission leaves it
-- exactly one window after it was made, as limit.Memory's log does.

-- slideUsed drops the admissions that left by now (only when write) and
-- returns the total still counted and the oldest admission's µs (nil
-- when none).
local function slideUsed(key, window, now, write)
  local tkey = key .. ':n'
  local used = num(redis.call('GET', tkey))
  local gone = redis.call('ZRANGEBYSCORE', key, '-inf', now - window)
  if #gone > 0 then
    for _, m in ipairs(gone) do used = used - num(string.match(m, ':(%d+)$')) end
    if used < 0 then used = 0 end
    if write then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
      redis.call('SET', tkey, I(used), 'PX', I(math.ceil(window / 1000) + 1000))
    end
  end
  local first = redis.call('ZRANGEBYSCORE', key, '(' .. I(now - window), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  return used, tonumber(first[2])
end

-- slideSnap is {limit, remaining, reset_us}: reset until the oldest
-- admission leaves.
local function slideSnap(used, oldest, limit, window, now)
  local rem = limit - used
  if rem < 0 then rem = 0 end
  local reset = 0
  if oldest then reset = math.max(oldest + window - now, 0) end
  return {limit, rem, reset}
end

-- slideWait is how long until over more units have left: the oldest
-- admissions are walked (at most 1000; beyond, a whole window).
local function slideWait(key, window, now, over)
  local xs = redis.call('ZRANGEBYSCORE', key, '(' .. I(now - window), '+inf', 'WITHSCORES', 'LIMIT', 0, 1000)
  for j = 1, #xs, 2 do
    over = over - num(string.match(xs[j], ':(%d+)$'))
    if over <= 0 then return math.max(tonumber(xs[j + 1]) + window - now, 1) end
  end
  return window
end

-- slideAdd counts an admission of cost at now.
local function slideAdd(key, id, cost, window, now)
  if cost <= 0 then return end
  local px = I(math.ceil(window / 1000) + 1000)
  redis.call('ZADD', key, I(now), id .. ':' .. I(cost))
  redis.call('PEXPIRE', key, px)
  local tkey = key .. ':n'
  redis.call('INCRBY', tkey, I(cost))
  redis.call('PEXPIRE', tkey, px)
end

-- slideRefund takes delta units back from the newest admissions.
local function slideRefund(key, delta)
  local xs = redis.call('ZREVRANGE', key, 0, 63, 'WITHSCORES')
  local tkey = key .. ':n'
  for j = 1, #xs, 2 do
    if delta <= 0 then break end
    local m = xs[j]
    local c = num(string.match(m, ':(%d+)$'))
    local take = math.min(delta, c)
    redis.call('ZREM', key, m)
    if c - take > 0 then
      redis.call('ZADD', key, xs[j + 1], string.match(m, '^(.*):%d+$') .. ':' .. I(c - take))
    end
    redis.call('DECRBY', tkey, I(take))
    delta = delta - take
  end
end

-- adjust corrects n rate buckets by deltas (a settlement's actual usage
-- against its estimate, or an admission taken back): bucket i is
-- KEYS[ko + i], its limit, window us (negative: sliding) and delta are
-- ARGV[ao + 3i - 2 ..]. id names what a sliding window counts from now.
local function adjust(ko, ao, n, id, now)
  for i = 1, n do
    local a = ao + (i - 1) * 3
    local key = KEYS[ko + i]
    local limit, window, delta = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    if limit > 0 and delta ~= 0 and window < 0 then
      -- A sliding window: usage above the estimate counts from now; below
      -- it, the excess is taken back from the newest admissions.
      if delta > 0 then
        slideUsed(key, -window, now, true)
        slideAdd(key, 's' .. id, math.min(delta, limit), -window, now)
      else
        slideRefund(key, -delta)
      end
    elseif limit > 0 and delta ~= 0 then
      local tokens = level(key, limit, window, now)
      tokens = math.max(-limit, math.min(limit, tokens - delta))
      save(key, tokens, limit, window, now)
    end
  end
end
