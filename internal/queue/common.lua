-- Helpers prepended to every queue script (one script = one atomic
-- transition; Lua has no includes, so the Go side concatenates).
--
-- Every script runs in one provider's slot. ARGV[1] is P, that provider's
-- key prefix (its hash tag names the provider), ARGV[2] C, the prefix of
-- the pub/sub channels (not keys: any slot may publish), ARGV[3] PROV, the
-- provider; a script's own arguments follow from ARGV[4]. Keys:
--   P..'j:'..id   hash: st (waiting|leased|done|canceled|dead), prov, tier,
--                 score, gen, tok, wrk, dlv, dl (deadline ms), to (timeout
--                 ms), org, otok, rb (request+meta bytes), tb (terminal
--                 bytes reserved or used), ep, tenant, err, created,
--                 com ('1' once stream bytes were published)
--   P..'r:'..id   the request (opaque to Lua), P..'t:'..id its terminal
--   P..'w'        waiting, by score; P..'p' leased, by lease expiry
--   P..'leases', P..'origins', P..'done', P..'dlq', P..'jobs'  indexes
--   P..'acct'     hash: base, term, dlqb (bytes held)
--   P..'seq', P..'format'
--   P..'idle'     hash: a standing worker's token → its lease terms
--                 ("limit lease_ms unary_reserve stream_reserve max_term
--                 worker"); P..'idlex' the same tokens by expiry
--   P..'hd:'..tok the job an enqueue handed to that standing token (until
--                 the worker's next lease with it, or the lease time)
-- No key name is built from a record's fields, so a corrupted record
-- cannot make a script reach into another slot.
-- Times are Redis TIME in milliseconds: no host clock decides anything.
local P, C, PROV = ARGV[1], ARGV[2], ARGV[3]

local function I(x) return string.format('%d', x) end
local function num(v) return tonumber(v) or 0 end

-- int: v is a decimal integer as the scripts write them, small enough for
-- HINCRBY and exact in Lua's doubles (16 characters at most).
local function int(v)
  return type(v) == 'string' and #v <= 16 and string.match(v, '^%-?%d+$') ~= nil
end

-- malformed names the first field of a job record that a transition
-- computes with (HINCRBY, ZADD, a comparison) and that is not what the
-- scripts write; nil when the record is well-formed. A record another
-- program wrote or a corrupted one must not make a script fail: a script
-- that errors on the job at the head of a queue stops every worker from
-- leasing anything behind it.
local function malformed(h)
  -- A record naming another provider than the queue it sits in.
  if h.prov ~= PROV then return 'prov' end
  for _, f in ipairs({'gen', 'dlv', 'dl', 'to', 'score', 'rb', 'tb', 'tier'}) do
    if not int(h[f]) then return f end
  end
  return nil
end

-- acct_num reads a byte counter of the acct hash (0 when it is absent or
-- not an integer; acct_add then restarts it).
local function acct_num(f)
  local v = redis.call('HGET', P .. 'acct', f)
  if int(v) then return tonumber(v) end
  return 0
end

-- acct_add adds d to a byte counter of the acct hash; a counter that is
-- not an integer (written by something else) restarts from 0, logged,
-- rather than failing every transition that counts bytes.
local function acct_add(f, d)
  local v = redis.call('HGET', P .. 'acct', f)
  if v and not int(v) then
    redis.log(redis.LOG_WARNING, 'switchboard queue: counter acct.' .. f .. ' was not an integer; restarted from 0')
    redis.call('HSET', P .. 'acct', f, '0')
  end
  redis.call('HINCRBY', P .. 'acct', f, I(d))
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function job(id) return P .. 'j:' .. id end

-- Fixed envelopes the scripts write themselves (see envelope.go).
local CANCELED = '{"kind":"canceled","status":499}\n'
local function dead_env(msg) return '{"kind":"dead","status":502}\n' .. msg end

-- msg is one origin message: id, generation, kind, seq, then the payload.
local function notify(org, id, gen, kind, seq, payload)
  if org and org ~= '' then
    redis.call('PUBLISH', C .. 'o:' .. org, id .. '\n' .. gen .. '\n' .. kind .. '\n' .. seq .. '\n' .. (payload or ''))
  end
end

-- unlease drops a delivery from the lease indexes and frees the terminal
-- capacity reserved for it beyond used (bytes kept for a stored terminal).
local function unlease(id, h, used)
  redis.call('ZREM', P .. 'leases', id)
  redis.call('ZREM', P .. 'p', id)
  local tb = num(h.tb)
  acct_add('term', used - tb)
  redis.call('HSET', job(id), 'tb', I(used))
  -- A provider slot and terminal capacity just freed: a job waiting for
  -- either can be leased now, not at the workers' next idle poll. With
  -- none waiting, no worker is woken for nothing.
  if redis.call('ZCARD', P .. 'w') > 0 then redis.call('PUBLISH', C .. 'wake', PROV) end
end

-- unstand withdraws a standing worker's token (see lease.lua).
local function unstand(tok)
  redis.call('HDEL', P .. 'idle', tok)
  redis.call('ZREM', P .. 'idlex', tok)
end

-- fields reads a job hash into a table (nil when absent).
local function fields(id)
  local raw = redis.call('HGETALL', job(id))
  if #raw == 0 then return nil end
  local h = {}
  for i = 1, #raw, 2 do h[raw[i]] = raw[i + 1] end
  return h
end

-- finish marks a job terminal with env as its result and schedules its
-- record for reclaim after ttl ms.
local function finish(id, h, st, env, ttl, now)
  redis.call('SET', P .. 't:' .. id, env)
  redis.call('HSET', job(id), 'st', st)
  redis.call('ZREM', P .. 'origins', id)
  redis.call('ZADD', P .. 'done', I(now + ttl), id)
end

-- cancel_job cancels a waiting or leased job: the fixed cancellation
-- envelope becomes its terminal, the worker (if any) is told, the origin
-- too. It returns the state it found.
local function cancel_job(id, h, ttl, now)
  local st = h.st
  if st == 'waiting' then
    redis.call('ZREM', P .. 'w', id)
  elseif st == 'leased' then
    unlease(id, h, 0)
    redis.call('PUBLISH', C .. 'wk:' .. (h.wrk or ''), id .. '\n' .. (h.gen or '0'))
  else
    return st
  end
  finish(id, h, 'canceled', CANCELED, ttl, now)
  notify(h.org, id, h.gen or '0', 'X', 0, CANCELED)
  return st
end

-- drop deletes a job and everything it holds from every index.
local function drop(id, h)
  if h then
    redis.call('ZREM', P .. 'w', id)
    redis.call('ZREM', P .. 'p', id)
    if h.st == 'dead' then
      acct_add('dlqb', -num(h.rb))
    else
      acct_add('base', -num(h.rb))
    end
    acct_add('term', -num(h.tb))
  end
  redis.call('DEL', job(id), P .. 'r:' .. id, P .. 't:' .. id)
  for _, ix in ipairs({'leases', 'origins', 'done', 'dlq', 'jobs'}) do
    redis.call('ZREM', P .. ix, id)
  end
end

-- fence checks a worker's token and generation: 'ok', 'canceled' (the
-- job was canceled while this delivery held it) or 'lost'.
local function fence(h, tok, gen)
  if not h or h.tok ~= tok or h.gen ~= gen or malformed(h) then return 'lost' end
  if h.st == 'leased' then return 'ok' end
  if h.st == 'canceled' then return 'canceled' end
  return 'lost'
end

-- to_dlq moves a job to the dead-letter queue with a diagnostic note
-- (never the prompt) and tells its origin.
local function to_dlq(id, h, why, ttl, now)
  if h.st == 'leased' then unlease(id, h, 0) end
  redis.call('ZREM', P .. 'w', id)
  redis.call('HSET', job(id), 'st', 'dead', 'err', why, 'dead_at', I(now))
  redis.call('ZREM', P .. 'jobs', id)
  redis.call('ZREM', P .. 'origins', id)
  redis.call('ZADD', P .. 'dlq', I(now), id)
  acct_add('base', -num(h.rb))
  acct_add('dlqb', num(h.rb))
  local env = dead_env(why)
  notify(h.org, id, h.gen or '0', 'X', 0, env)
end
