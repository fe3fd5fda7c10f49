package admin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// followMax bounds the changes a replica catches up on one by one; further
// behind, it reads every record.
const followMax = 1000

// scriptFollow reads, in one step, the version, the epoch and the records
// that the changes after ARGV[1] touched (their audit rows name them): a
// replica that is a few changes behind reads those records, not every
// one (HGETALL of 100,000 keys on every change would hold the one Redis
// the fleet's admission runs on). The reply is {version, epoch, n,
// kind, name, record-or-nil, ...}; n is -1 when the audit rows do not
// cover the gap (too far behind, or the records were lost).
var scriptFollow = redis.NewScript(`
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
local e = redis.call('GET', KEYS[2]) or ''
local from = tonumber(ARGV[1])
if v <= from or v - from > tonumber(ARGV[2]) then return {v, e, -1} end
local rows = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. from, v)
if #rows ~= v - from then return {v, e, -1} end
local out = {v, e, #rows}
for _, r in ipairs(rows) do
  local a = cjson.decode(r)
  if string.sub(a.action, 1, 4) == 'key.' then
    table.insert(out, 'k')
    table.insert(out, a.target)
    table.insert(out, redis.call('HGET', KEYS[4], a.target))
  elseif string.sub(a.action, 1, 7) == 'tenant.' then
    table.insert(out, 't')
    table.insert(out, a.target)
    table.insert(out, redis.call('HGET', KEYS[5], a.target))
  else
    -- a row that touches no record (an alert): nothing to read
    table.insert(out, 'n')
    table.insert(out, a.target)
    table.insert(out, false)
  end
end
return out`)

// follow brings base (version base.Version of epoch) up to the stored
// version by reading what the changes since touched; ok is false when it
// cannot (another epoch, too far behind): read every record then.
func (r *Redis) follow(ctx context.Context, c redis.Scripter, base *State, epoch string) (st *State, ok bool, err error) {
	res, err := scriptFollow.Run(ctx, c, []string{redisVersion, redisEpoch, redisAudit, redisKeys, redisTenants},
		base.Version, followMax).Slice()
	if err != nil {
		return nil, false, err
	}
	if len(res) < 3 {
		return nil, false, fmt.Errorf("admin follow: a reply of %d items", len(res))
	}
	v, _ := res[0].(int64)
	e, _ := res[1].(string)
	n, _ := res[2].(int64)
	if n < 0 || e != epoch || int64(len(res)) != 3+3*n {
		return nil, false, nil
	}
	// Each touched record as it is now: present is put, absent (a deleted
	// tenant) is deleted; a name touched twice reads the same both times.
	var ch Change
	for i := 3; i < len(res); i += 3 {
		kind, _ := res[i].(string)
		name, _ := res[i+1].(string)
		rec, found := res[i+2].(string)
		switch {
		case kind == "k" && found:
			k := &Key{}
			if err := json.Unmarshal([]byte(rec), k); err != nil {
				return nil, false, fmt.Errorf("admin key %s: %w", name, err)
			}
			ch.PutKeys = append(ch.PutKeys, k)
		case kind == "t" && found:
			t := &Tenant{}
			if err := json.Unmarshal([]byte(rec), t); err != nil {
				return nil, false, fmt.Errorf("admin tenant %s: %w", name, err)
			}
			ch.PutTenants = append(ch.PutTenants, t)
		case kind == "t":
			ch.DelTenants = append(ch.DelTenants, name)
		}
		// A key's record is never deleted (a revoked key stays, marked).
	}
	return base.after(&ch, v), true, nil
}
