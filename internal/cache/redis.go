package cache

import (
	"context"
	_ "embed"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RedisPrefix is the versioned namespace of the fleet's cache. Its hash
// tag puts every cache key in one Redis Cluster slot, so a script may
// touch an entry, its partition's LRU set and the byte totals at once;
// each script declares the namespace's totals key so a cluster client
// routes it to that slot.
const RedisPrefix = "switchboard:{cache:v1}:"

// redisOverhead is counted per entry beyond its value and key (the LRU
// member, the size field, the value key).
const redisOverhead = 128

var (
	//go:embed redis_get.lua
	luaGet string
	//go:embed redis_put.lua
	luaPut string

	scriptGet = redis.NewScript(luaGet)
	scriptPut = redis.NewScript(luaPut)
)

// Redis is one cache for every replica of a fleet. An entry is a string
// that expires on its own (PX ttl); each partition keeps a sorted set of
// its entries by last use and their sizes, and a put trims the set from
// its least recently used end until the partition fits its byte budget,
// atomically (one script). The budget is the gateway's, not Redis's
// maxmemory: the fleet's Redis must not evict (docs/fleet.md), since it
// also holds spend.
type Redis struct {
	c      redis.UniversalClient
	prefix string
}

// NewRedis uses c (its command timeout bounds each call too).
func NewRedis(c redis.UniversalClient) *Redis { return &Redis{c: c, prefix: RedisPrefix} }

// Get implements Store; a hit moves the entry to its partition's most
// recently used end.
func (s *Redis) Get(ctx context.Context, key, part string) (*Entry, error) {
	v, err := scriptGet.Run(ctx, s.c, []string{s.prefix + "bytes"}, s.prefix, key, part).Text()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Decode([]byte(v))
}

// Put implements Store.
func (s *Redis) Put(ctx context.Context, key string, e *Entry, b Bounds) (bool, error) {
	v := e.Encode()
	if int64(len(v)+len(key))+redisOverhead > b.MaxBytes {
		return false, nil
	}
	n, err := scriptPut.Run(ctx, s.c, []string{s.prefix + "bytes"}, s.prefix, key, b.Partition, v, b.TTL.Milliseconds(), b.MaxBytes, redisOverhead).Int()
	return n == 1, err
}

// Close implements Store (the client belongs to the caller).
func (s *Redis) Close() error { return nil }

// Held implements Held: the partitions' bytes, fleet-wide.
func (s *Redis) Held(ctx context.Context) (int64, error) {
	vs, err := s.c.HVals(ctx, s.prefix+"bytes").Result()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, v := range vs {
		x, _ := strconv.ParseInt(v, 10, 64)
		n += x
	}
	return n, nil
}
