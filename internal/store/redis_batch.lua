-- Batch: admissions and settlements that one replica's pipeline queued
-- one after the other, run as one script in their order, on one Redis
-- TIME. Each is decided exactly as its own script would decide it (the
-- same admit and settle functions, each on its own keys and arguments);
-- what the batch saves is a script call, a TIME and, through the cache
-- of redis_common.lua, the reads and writes of the keys they share (a
-- tenant's buckets, rolling day, spend window and live-hold count are
-- read once and written once). The whole batch is atomic, as each of its
-- decisions was.
--
-- KEYS: every operation's keys, in order.
-- ARGV: 1 operations (n); then per operation: kind ('a' admit, 's'
--       settle), its keys, its arguments (3n values); then every
--       operation's arguments, in order.
-- Reply: per operation its script's reply, or an error reply for one
--        that failed (what it wrote before failing stays, as for a
--        script of its own).
local now, sec = clock()
local n = tonumber(ARGV[1])
local ko, ao = 0, 1 + 3 * n
local out = {}
for i = 1, n do
  local h = 1 + (i - 1) * 3
  local kind, nk, na = ARGV[h + 1], tonumber(ARGV[h + 2]), tonumber(ARGV[h + 3])
  local keys, args = {}, {}
  for j = 1, nk do keys[j] = KEYS[ko + j] end
  for j = 1, na do args[j] = ARGV[ao + j] end
  ko, ao = ko + nk, ao + na
  local f = admit
  if kind == 's' then f = settle end
  local ok, r = pcall(f, keys, args, now, sec)
  if ok then
    out[i] = r
  elseif type(r) == 'table' and r.err then
    out[i] = r
  else
    out[i] = {err = tostring(r)}
  end
end
flush()
return out
