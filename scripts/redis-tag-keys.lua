-- One-off migration of a single Redis written by a Switchboard without
-- hash tags to the tagged key names (docs/fleet.md, "Moving to tagged
-- keys"). Run it once, with every replica stopped, against that Redis:
--
--   redis-cli -u redis://host:6379/0 --eval scripts/redis-tag-keys.lua
--
-- Spend windows, rolling-day counters, rate buckets, sliding windows,
-- penalties and health records move to their tenant's or owner's tag; the
-- admin records move under their namespace's tag; the usage stream keeps
-- its name. The job queue is not moved: it is one queue per provider now,
-- each in its own slot, and is drained before the switch instead
-- (docs/fleet.md, "Moving to per-provider queues"); its old keys
-- (switchboard:q:v1:...) are left as they are and not counted. The
-- fleet-wide live holds, settlement guard and attempt index of the old
-- layout are deleted: with the fleet stopped no attempt is in flight, and
-- a hold left by a crash holds no money of its own (its reservation stays
-- in its window either way). Idempotency records, untagged or in the
-- one-slot {idem:v1} namespace of the first tagged versions, are deleted
-- too: they now live under their tenant's tag, but their names hash the
-- tenant with the key, so no record can say whose it is. They are
-- short-lived stored answers; a retry of a request answered before the
-- move runs again. RENAME keeps each key's TTL; a key whose new name
-- already exists is left alone and counted. Keys already tagged are not
-- touched, so a second run changes nothing.
--
-- Reply: {renamed, deleted, left (new name taken), unknown}.
local P = 'switchboard:'
local renamed, deleted, taken, unknown = 0, 0, 0, 0

local function owner(k)
  local o = string.match(k, '^(.*):[^:]*$')
  if o and o ~= '' then return o, string.sub(k, #o + 1) end
  return k, ''
end

local function newName(k)
  local rest = string.sub(k, #P + 1)
  if string.sub(rest, 1, 6) == 'admin:' then return P .. '{admin}:' .. string.sub(rest, 7) end
  local kind, name = string.match(rest, '^(%a+):(.*)$')
  if kind == 'b' then
    local o, tail = owner(name)
    return P .. 'b:{' .. o .. '}' .. tail
  elseif kind == 'sw' then
    local n = ''
    if string.sub(name, -2) == ':n' then name, n = string.sub(name, 1, -3), ':n' end
    local o, tail = owner(name)
    return P .. 'sw:{' .. o .. '}' .. tail .. n
  elseif kind == 'pen' then
    return P .. 'pen:{' .. name .. '}'
  elseif kind == 'd' or kind == 'dm' then
    return P .. kind .. ':{t:' .. name .. '}'
  elseif kind == 'w' then
    local t, secs, start = string.match(name, '^(.*):(%d+):(%d+)$')
    if t then return P .. 'w:{t:' .. t .. '}:' .. secs .. ':' .. start end
  elseif kind == 'h' then
    return P .. 'h:{p:' .. name .. '}'
  end
  return nil
end

for _, k in ipairs(redis.call('KEYS', P .. '*')) do
  local rest = string.sub(k, #P + 1)
  local idem = string.sub(rest, 1, 10) == '{idem:v1}:' or
    (string.sub(rest, 1, 8) == 'idem:v1:' and not string.find(rest, '{', 1, true))
  if idem then
    redis.call('DEL', k)
    deleted = deleted + 1
  elseif string.find(k, '{', 1, true) or rest == 'usage:v1' or string.sub(rest, 1, 5) == 'q:v1:' then
    -- tagged already, a name that did not change, or the queue's
  elseif rest == 'holds' or rest == 'settled' or rest == 'attempts' or string.sub(rest, 1, 2) == 'a:' then
    redis.call('DEL', k)
    deleted = deleted + 1
  else
    local n = newName(k)
    if not n then
      unknown = unknown + 1
    elseif redis.call('RENAMENX', k, n) == 1 then
      renamed = renamed + 1
    else
      taken = taken + 1
    end
  end
end
return {renamed, deleted, taken, unknown}
