package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/store"
)

// Redis shares answers across the fleet (queue.mode: redis). Entries
// expire on their own (per-key PEXPIRE); each tenant's index sorted by
// expiry and size table let any replica recover the tenant's count and
// byte totals after the values are gone, in fixed-size batches.
type Redis struct {
	c   redis.UniversalClient
	lim Limits
}

// RedisPrefix is the versioned namespace of idempotency records. A
// tenant's records follow it under the tenant's hash tag, the one its
// ledger and buckets carry (store.TenantTag), then ':': a claim or a
// finish updates the entry, the tenant's index and its byte total
// together in one Redis Cluster slot, tenants spread over the masters,
// and all of a tenant's data lives (and fails over) together. A tenant
// name containing '}' ends the tag early, the same way in each of its
// keys, so they still share a slot.
const RedisPrefix = "switchboard:idem:v1:"

// NewRedis uses c.
func NewRedis(c redis.UniversalClient, lim Limits) *Redis {
	return &Redis{c: c, lim: lim}
}

// prefix starts every key of tenant's records.
func prefix(tenant string) string { return RedisPrefix + store.TenantTag(tenant) + ":" }

// keys is what every script declares: a key of the tenant's records,
// which routes it (in a cluster) to the tenant's slot.
func keys(p string) []string { return []string{p + "acct"} }

const luaIdemCommon = `
local P = ARGV[1]
local function I(x) return string.format('%d', x) end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- unindex takes k out of the index and its size out of the byte total.
local function unindex(k)
  local size = tonumber(redis.call('HGET', P .. 'sizes', k) or '0') or 0
  redis.call('HINCRBY', P .. 'acct', 'bytes', I(-size))
  redis.call('HDEL', P .. 'sizes', k)
  redis.call('ZREM', P .. 'index', k)
end
-- reclaim forgets index entries whose value expired (fixed batch).
local function reclaim(now)
  for _, k in ipairs(redis.call('ZRANGEBYSCORE', P .. 'index', '-inf', I(now), 'LIMIT', 0, 100)) do
    if redis.call('EXISTS', P .. 'e:' .. k) == 0 then unindex(k) end
  end
end
local function forget(k)
  unindex(k)
  redis.call('DEL', P .. 'e:' .. k)
end
`

var (
	scriptIdemClaim = redis.NewScript(luaIdemCommon + `
local k, hash, lease = ARGV[2], ARGV[3], tonumber(ARGV[4])
local e = P .. 'e:' .. k
local st = redis.call('HMGET', e, 'st', 'hash', 'rec')
if st[1] then
  if st[2] ~= hash then return {'conflict'} end
  if st[1] == 'pending' then return {'pending'} end
  return {'replay', st[3] or ''}
end
local now = now_ms()
reclaim(now)
local tok = ARGV[5]
redis.call('HSET', e, 'st', 'pending', 'hash', hash, 'tok', tok)
redis.call('PEXPIRE', e, I(lease))
redis.call('ZADD', P .. 'index', I(now + lease), k)
return {'fresh', tok}
`)
	scriptIdemFinish = redis.NewScript(luaIdemCommon + `
local k, tok, rec, ttl = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local max_entries, max_total = tonumber(ARGV[6]), tonumber(ARGV[7])
local e = P .. 'e:' .. k
local st = redis.call('HMGET', e, 'st', 'tok')
if st[1] ~= 'pending' or st[2] ~= tok then return 'lost' end
local now = now_ms()
local bytes = tonumber(redis.call('HGET', P .. 'acct', 'bytes') or '0') or 0
if redis.call('ZCARD', P .. 'index') > max_entries or bytes + #rec > max_total then
  reclaim(now)
  bytes = tonumber(redis.call('HGET', P .. 'acct', 'bytes') or '0') or 0
  if redis.call('ZCARD', P .. 'index') > max_entries or bytes + #rec > max_total then
    forget(k)
    return 'full'
  end
end
redis.call('HSET', e, 'st', 'done', 'rec', rec)
redis.call('PEXPIRE', e, I(ttl))
redis.call('ZADD', P .. 'index', I(now + ttl), k)
redis.call('HSET', P .. 'sizes', k, I(#rec))
redis.call('HINCRBY', P .. 'acct', 'bytes', I(#rec))
return 'ok'
`)
	// Renew extends a pending claim still held by tok (a lapsed one has
	// expired away, or been claimed afresh with another token).
	scriptIdemRenew = redis.NewScript(luaIdemCommon + `
local k, tok, lease = ARGV[2], ARGV[3], tonumber(ARGV[4])
local e = P .. 'e:' .. k
local st = redis.call('HMGET', e, 'st', 'tok')
if st[1] ~= 'pending' or st[2] ~= tok then return 'lost' end
redis.call('PEXPIRE', e, I(lease))
redis.call('ZADD', P .. 'index', I(now_ms() + lease), k)
return 'ok'
`)
	scriptIdemRelease = redis.NewScript(luaIdemCommon + `
local k, tok = ARGV[2], ARGV[3]
local st = redis.call('HMGET', P .. 'e:' .. k, 'st', 'tok')
if st[1] == 'pending' and st[2] == tok then forget(k) end
return 'ok'
`)
)

// rkey hashes the scope so that no Idempotency-Key or endpoint sits in
// Redis (the tenant's name does, in its tag, as in its ledger's keys).
func rkey(scope string) string {
	h := sha256.Sum256([]byte(scope))
	return hex.EncodeToString(h[:])
}

func (s *Redis) Claim(ctx context.Context, key Key, hash string, lease time.Duration) (State, *Record, string, error) {
	p := prefix(key.Tenant)
	res, err := scriptIdemClaim.Run(ctx, s.c, keys(p), p, rkey(key.Scope), hash, lease.Milliseconds(), newToken()).StringSlice()
	if err != nil {
		return 0, nil, "", err
	}
	switch {
	case len(res) == 1 && res[0] == "conflict":
		return Conflict, nil, "", nil
	case len(res) == 1 && res[0] == "pending":
		return Pending, nil, "", nil
	case len(res) == 2 && res[0] == "replay":
		r, err := Decode([]byte(res[1]))
		return Replay, r, "", err
	case len(res) == 2 && res[0] == "fresh":
		return Fresh, nil, res[1], nil
	}
	return 0, nil, "", fmt.Errorf("idempotency: unexpected reply %v", res)
}

// Finish stores rec within the tenant's bounds (MaxEntries, MaxTotal).
func (s *Redis) Finish(ctx context.Context, key Key, token string, rec *Record) (bool, error) {
	b := rec.Encode()
	if int64(len(b)) > s.lim.MaxBytes {
		return false, errors.Join(ErrTooLarge, s.Release(ctx, key, token))
	}
	p := prefix(key.Tenant)
	res, err := scriptIdemFinish.Run(ctx, s.c, keys(p), p, rkey(key.Scope), token, b, s.lim.TTL.Milliseconds(),
		s.lim.MaxEntries, s.lim.MaxTotal).Text()
	return res == "ok", err
}

func (s *Redis) Renew(ctx context.Context, key Key, token string, lease time.Duration) (bool, error) {
	p := prefix(key.Tenant)
	res, err := scriptIdemRenew.Run(ctx, s.c, keys(p), p, rkey(key.Scope), token, lease.Milliseconds()).Text()
	return res == "ok", err
}

func (s *Redis) Release(ctx context.Context, key Key, token string) error {
	p := prefix(key.Tenant)
	return scriptIdemRelease.Run(ctx, s.c, keys(p), p, rkey(key.Scope), token).Err()
}
