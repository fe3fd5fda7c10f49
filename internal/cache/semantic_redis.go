package cache

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed redis_vec_add.lua
	luaVecAdd string
	//go:embed redis_vec_forget.lua
	luaVecForget string

	scriptVecAdd    = redis.NewScript(luaVecAdd)
	scriptVecForget = redis.NewScript(luaVecForget)
)

// RedisIndex is the semantic index of a fleet: per group, a hash of
// packed unit vectors and a sorted set of them by age (both expire ttl
// after the group's last addition), and one sorted set over all groups
// that bounds the total. A lookup reads the group's vectors (at most
// MaxGroupVectors) and compares them here.
type RedisIndex struct {
	c      redis.UniversalClient
	prefix string
	max    int
}

// NewRedisIndex keeps at most max vectors in c.
func NewRedisIndex(c redis.UniversalClient, max int) *RedisIndex {
	return &RedisIndex{c: c, prefix: RedisPrefix, max: max}
}

// Nearest implements Index.
func (x *RedisIndex) Nearest(ctx context.Context, group string, vec []float32, min float64) (string, float64, error) {
	all, err := x.c.HGetAll(ctx, x.prefix+"sv:"+group).Result()
	if err != nil {
		return "", 0, err
	}
	best, score := "", min
	for k, b := range all {
		if s := similarity(vec, unpackVector([]byte(b))); s >= score {
			best, score = k, s
		}
	}
	if best == "" {
		return "", 0, nil
	}
	return best, score, nil
}

// Add implements Index.
func (x *RedisIndex) Add(ctx context.Context, group, key string, vec []float32, ttl time.Duration) error {
	return scriptVecAdd.Run(ctx, x.c, []string{x.prefix + "bytes"}, x.prefix, group, key, packVector(vec), ttl.Milliseconds(), x.max, MaxGroupVectors).Err()
}

// Forget implements Index.
func (x *RedisIndex) Forget(ctx context.Context, group, key string) error {
	return scriptVecForget.Run(ctx, x.c, []string{x.prefix + "bytes"}, x.prefix, group, key).Err()
}
