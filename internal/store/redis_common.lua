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

-- The keys a decision reads and writes most (rate buckets, penalties,
-- the rolling-day hashes, spend windows, the live holds' count) go
-- through a cache for the script's run: a key is read once, written in
-- the cache, and written back once by flush(), which every script that
-- writes through it calls before it returns. So a batch of decisions in
-- one script (redis_batch.lua) reads and writes each shared key once. An
-- expiry is set after its key's write-back (EXPIREAT on a key not yet
-- written would do nothing). Other keys (zsets, sliding windows, the
-- guard) are read and written directly.
local scache, sdirty = {}, {}     -- string key: value (false: absent); dirty: px
local hcache, hdirty = {}, {}     -- hash key: field: value (false: absent); dirty: field set
local expiries = {}               -- key: Unix s
local holdsN, dfirst = {}, {}     -- zset key: ZCARD; daily minutes zset: ZRANGE 0 0

local function sget(key)
  local v = scache[key]
  if v == nil then
    v = redis.call('GET', key)
    scache[key] = v
  end
  return v
end

local function sset(key, v, px)
  scache[key], sdirty[key] = v, px
end

-- hmget is HMGET key fields... through the cache.
local function hmget(key, ...)
  local c = hcache[key]
  if not c then
    c = {}
    hcache[key] = c
  end
  local fs, want = {...}, {}
  for _, f in ipairs(fs) do
    if c[f] == nil then want[#want + 1] = f end
  end
  if #want > 0 then
    local v = redis.call('HMGET', key, unpack(want))
    for i, f in ipairs(want) do c[f] = v[i] end
  end
  local out = {}
  for i, f in ipairs(fs) do out[i] = c[f] end
  return out
end

-- hset is HSET key field value ... through the cache; a false value
-- deletes the field.
local function hset(key, ...)
  local c, d = hcache[key], hdirty[key]
  if not c then
    c = {}
    hcache[key] = c
  end
  if not d then
    d = {}
    hdirty[key] = d
  end
  local xs = {...}
  for j = 1, #xs, 2 do
    c[xs[j]], d[xs[j]] = xs[j + 1], true
  end
end

local function expireat(key, t) expiries[key] = t end

-- zcard is a zset's ZCARD, kept while the script adds and removes
-- through holdsAdd.
local function zcard(key)
  local n = holdsN[key]
  if not n then
    n = redis.call('ZCARD', key)
    holdsN[key] = n
  end
  return n
end

local function holdsAdd(key, delta)
  if holdsN[key] then holdsN[key] = holdsN[key] + delta end
end

-- flush writes back what the cache holds changed.
local function flush()
  for key, px in pairs(sdirty) do redis.call('SET', key, scache[key], 'PX', px) end
  for key, fs in pairs(hdirty) do
    local c, set, del = hcache[key], {}, {}
    for f in pairs(fs) do
      if c[f] then
        set[#set + 1] = f
        set[#set + 1] = c[f]
      else
        del[#del + 1] = f
      end
    end
    if #set > 0 then redis.call('HSET', key, unpack(set)) end
    if #del > 0 then redis.call('HDEL', key, unpack(del)) end
  end
  for key, t in pairs(expiries) do redis.call('EXPIREAT', key, t) end
  sdirty, hdirty, expiries = {}, {}, {}
end

-- A bucket is one string: three little-endian doubles (tokens, last
-- update in us, capacity), packed with the struct library Redis embeds.
-- One GET and one SET PX per bucket (through the cache), and doubles
-- round-trip exactly.

-- level is a bucket's tokens at now (a missing bucket is full), as the
-- in-process limit.Memory computes it: continuous refill of limit per
-- window, capped at limit; a changed limit keeps what was consumed.
local function level(key, limit, window, now)
  local v = sget(key)
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
  sset(key, struct.pack('<ddd', tokens, now, limit), I(math.ceil(2 * window / 1000) + 1000))
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
-- minute has left, so a steady caller pays two reads (once per script).
local function firstMinute(zkey)
  local f = dfirst[zkey]
  if not f then
    f = redis.call('ZRANGE', zkey, 0, 0)
    dfirst[zkey] = f
  end
  return f
end

local function daily(dkey, zkey, floor, m)
  local first = firstMinute(zkey)
  if first[1] and tonumber(first[1]) <= floor then
    local old = redis.call('ZRANGEBYSCORE', zkey, '-inf', floor)
    local r, k = 0, 0
    for _, x in ipairs(old) do
      local v = hmget(dkey, 'r' .. x, 'k' .. x)
      r, k = r + num(v[1]), k + num(v[2])
      hset(dkey, 'r' .. x, false, 'k' .. x, false)
    end
    local t = hmget(dkey, 'R', 'K')
    hset(dkey, 'R', I(num(t[1]) - r), 'K', I(num(t[2]) - k))
    redis.call('ZREMRANGEBYSCORE', zkey, '-inf', floor)
    dfirst[zkey] = nil
    first = firstMinute(zkey)
  end
  local v = hmget(dkey, 'R', 'K', 'r' .. (m or 0), 'k' .. (m or 0))
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
local function adjust(KEYS, ARGV, ko, ao, n, id, now)
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
