package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Redis key names, under the fleet's prefix. The hash tag keeps them in
// one Redis Cluster slot: a change watches the version and writes the
// records, the audit row and the version in one transaction.
const (
	redisPrefix  = "switchboard:{admin}:"
	redisVersion = redisPrefix + "version"
	redisKeys    = redisPrefix + "keys"    // hash: id → Key JSON
	redisTenants = redisPrefix + "tenants" // hash: name → Tenant JSON
	redisAudit   = redisPrefix + "audit"   // sorted set: Seq → AuditEntry JSON
	redisEpoch   = redisPrefix + "epoch"   // random, set by the first change: one life of the records
	// RedisChannel carries the new version after every change (a
	// channel, not a key: its name is the one earlier versions used).
	RedisChannel = "switchboard:admin:changed"
)

// Redis keeps the records in Redis for a fleet. A change is an optimistic
// transaction: WATCH the version, read, decide, then MULTI/EXEC the
// records, the audit row and the version bump; EXEC applies all of it or,
// when another replica changed the version meanwhile, nothing (and the
// change runs again on the new state).
type Redis struct {
	c    redis.UniversalClient
	memo memo
}

// NewRedis uses c (its timeouts bound every command).
func NewRedis(c redis.UniversalClient) *Redis { return &Redis{c: c} }

// updateTries bounds the reruns of a change that keeps losing to others.
const updateTries = 64

func (r *Redis) Load(ctx context.Context) (*State, error) {
	v, epoch, err := r.stamp(ctx, r.c)
	if err != nil {
		return nil, err
	}
	if st := r.memo.at(v, epoch); st != nil {
		return st, nil
	}
	if base, e := r.memo.last(); base != nil && e == epoch && epoch != "" && v > base.Version {
		st, ok, err := r.follow(ctx, r.c, base, epoch)
		if err != nil {
			return nil, err
		}
		if ok {
			r.memo.keep(st, epoch)
			return st, nil
		}
	}
	// Read in one MULTI so that the version matches the records.
	cmds, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, redisVersion)
		p.Get(ctx, redisEpoch)
		p.HGetAll(ctx, redisKeys)
		p.HGetAll(ctx, redisTenants)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	st, err := stateOf(cmds[0].(*redis.StringCmd), cmds[2].(*redis.MapStringStringCmd), cmds[3].(*redis.MapStringStringCmd))
	if err != nil {
		return nil, err
	}
	if epoch, err = epochOf(cmds[1].(*redis.StringCmd)); err != nil {
		return nil, err
	}
	r.memo.keep(st, epoch)
	return st, nil
}

// stamp reads the version and the epoch ("" before the first change).
func (r *Redis) stamp(ctx context.Context, c redis.Cmdable) (int64, string, error) {
	vals, err := c.MGet(ctx, redisVersion, redisEpoch).Result()
	if err != nil {
		return 0, "", err
	}
	var v int64
	if s, ok := vals[0].(string); ok {
		if v, err = strconv.ParseInt(s, 10, 64); err != nil {
			return 0, "", fmt.Errorf("admin version: %w", err)
		}
	}
	epoch, _ := vals[1].(string)
	return v, epoch, nil
}

func epochOf(c *redis.StringCmd) (string, error) {
	e, err := c.Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return e, err
}

// watched reads the state inside a WATCH of the version and the epoch:
// the memo's when it is that version, else every record (EXEC then fails
// should anyone change them before it).
func (r *Redis) watched(ctx context.Context, tx *redis.Tx) (*State, string, error) {
	v, epoch, err := r.stamp(ctx, tx)
	if err != nil {
		return nil, "", err
	}
	if st := r.memo.at(v, epoch); st != nil {
		return st, epoch, nil
	}
	if base, e := r.memo.last(); base != nil && e == epoch && epoch != "" && v > base.Version {
		st, ok, err := r.follow(ctx, tx, base, epoch)
		if err != nil || ok {
			return st, epoch, err
		}
	}
	st, err := stateOf(tx.Get(ctx, redisVersion), tx.HGetAll(ctx, redisKeys), tx.HGetAll(ctx, redisTenants))
	return st, epoch, err
}

func stateOf(ver *redis.StringCmd, keys, tenants *redis.MapStringStringCmd) (*State, error) {
	// A failed read is never taken for "no records": that would drop
	// every issued key from the table.
	for _, c := range []redis.Cmder{keys, tenants} {
		if err := c.Err(); err != nil {
			return nil, err
		}
	}
	st := newState()
	if v, err := ver.Int64(); err == nil {
		st.Version = v
	} else if !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("admin version: %w", err)
	}
	for id, js := range keys.Val() {
		k := &Key{}
		if err := json.Unmarshal([]byte(js), k); err != nil {
			return nil, fmt.Errorf("admin key %s: %w", id, err)
		}
		st.Keys[k.ID] = k
	}
	for name, js := range tenants.Val() {
		t := &Tenant{}
		if err := json.Unmarshal([]byte(js), t); err != nil {
			return nil, fmt.Errorf("admin tenant %s: %w", name, err)
		}
		st.Tenants[t.Name] = t
	}
	return st, nil
}

func (r *Redis) Version(ctx context.Context) (int64, error) {
	v, err := r.c.Get(ctx, redisVersion).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

func (r *Redis) Update(ctx context.Context, fn func(*State) (*Change, error)) (int64, error) {
	for range updateTries {
		var v int64
		var kept *State
		var change *Change
		var epoch string
		err := r.c.Watch(ctx, func(tx *redis.Tx) error {
			st, e, err := r.watched(ctx, tx)
			if err != nil {
				return err
			}
			ch, err := fn(st)
			if err != nil {
				return err
			}
			kept, change, epoch = st, ch, e
			newEpoch := epoch == ""
			if newEpoch {
				epoch = randomHex(8)
			}
			v = st.Version + 1
			a := ch.Audit
			a.Seq = v
			ab, _ := json.Marshal(a)
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range ch.PutKeys {
					b, _ := json.Marshal(k)
					p.HSet(ctx, redisKeys, k.ID, b)
				}
				for _, t := range ch.PutTenants {
					b, _ := json.Marshal(t)
					p.HSet(ctx, redisTenants, t.Name, b)
				}
				if len(ch.DelTenants) > 0 {
					p.HDel(ctx, redisTenants, ch.DelTenants...)
				}
				p.ZAdd(ctx, redisAudit, redis.Z{Score: float64(v), Member: ab})
				p.ZRemRangeByRank(ctx, redisAudit, 0, -AuditMax-1)
				p.Set(ctx, redisVersion, v, 0)
				if newEpoch {
					p.Set(ctx, redisEpoch, epoch, 0)
				}
				p.Publish(ctx, RedisChannel, strconv.FormatInt(v, 10))
				return nil
			})
			return err
		}, redisVersion, redisEpoch)
		if errors.Is(err, redis.TxFailedErr) {
			continue // another replica's change won: decide again
		}
		if err != nil {
			return 0, err
		}
		r.memo.keep(kept.after(change, v), epoch)
		return v, nil
	}
	return 0, ErrConflict
}

func (r *Redis) Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	vals, err := r.c.ZRangeByScore(ctx, redisAudit, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(q.After, 10), Max: "+inf",
		Count: int64(q.Limit)}).Result()
	if err != nil {
		return nil, err
	}
	out := make([]AuditEntry, 0, len(vals))
	for _, js := range vals {
		var e AuditEntry
		if err := json.Unmarshal([]byte(js), &e); err != nil {
			return nil, fmt.Errorf("admin audit row: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Changes signals every published change (the channel is closed when ctx
// ends). A lost subscription only delays a replica until the next poll.
func (r *Redis) Changes(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	ps := r.c.Subscribe(ctx, RedisChannel)
	go func() {
		defer close(out)
		defer ps.Close()
		ch := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}
