-- Peek: counters without debiting (nothing is written).
--
-- KEYS: per debit its bucket and penalty keys.
-- ARGV: 1 debits; then per debit: limit (-1 unlimited), window us, grouped.
-- Reply: per debit {limit, remaining, reset_us, penalized}.
local now = clock()
local out = {}
for i = 1, tonumber(ARGV[1]) do
  local a = 1 + (i - 1) * 3
  local limit, window = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local sliding = window < 0
  if sliding then window = -window end
  local s = {-1, 0, 0, 0}
  if limit == 0 then
    s = {0, 0, window, 0}
  elseif limit > 0 and sliding then
    local used, oldest = slideUsed(KEYS[(i - 1) * 2 + 1], window, now, false)
    local sn = slideSnap(used, oldest, limit, window, now)
    s = {sn[1], sn[2], sn[3], 0}
  elseif limit > 0 then
    local sn = snap(level(KEYS[(i - 1) * 2 + 1], limit, window, now), limit, window)
    s = {sn[1], sn[2], sn[3], 0}
  end
  if ARGV[a + 3] == '1' then
    local untilUs = num(redis.call('GET', KEYS[(i - 1) * 2 + 2]))
    if untilUs > now then
      s[2], s[4] = 0, 1
      s[3] = math.max(s[3], untilUs - now)
    end
  end
  out[i] = s
end
return out
