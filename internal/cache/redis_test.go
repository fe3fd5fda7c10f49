package cache

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/queue"
	"switchboard/internal/redisconn"
	"switchboard/internal/store/redistest"
)

// Redis going down makes lookups misses within the deadline, and its
// return makes the cache work again.
func TestRedisDownIsAMiss(t *testing.T) {
	rs := redistest.Start(t)
	c, err := queue.Dial(rs.URL, 200*time.Millisecond, 200*time.Millisecond, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc := New(Options{Store: NewRedis(c), Timeout: 300 * time.Millisecond})
	ctx := context.Background()
	rq := &Request{Protocol: ProtoChat, Model: "m", Body: []byte(chatBody)}
	l := cc.Lookup(ctx, policy(), rq, nil)
	serveChat(t, l, `{"choices":[{"finish_reason":"stop"}]}`)
	if l := cc.Lookup(ctx, policy(), rq, nil); l.Result != Hit {
		t.Fatalf("before: %s", l.Result)
	}
	rs.Kill()
	start := time.Now()
	l = cc.Lookup(ctx, policy(), rq, nil)
	if l.Result != Miss || time.Since(start) > 2*time.Second {
		t.Fatalf("Redis down: %s after %v", l.Result, time.Since(start))
	}
	serveChat(t, l, `{"choices":[{"finish_reason":"stop"}]}`) // the put fails quietly
	if n := count(cc.m.errors.WithLabelValues("put")); n != 1 {
		t.Fatalf("put errors %v", n)
	}
	rs.Restart()
	var got string
	for range 50 { // the pool redials on its own
		l = cc.Lookup(ctx, policy(), rq, nil)
		if l.Result == Miss && l.Recorder(nil) != nil {
			serveChat(t, l, `{"choices":[{"finish_reason":"stop"}]}`)
		}
		if got = cc.Lookup(ctx, policy(), rq, nil).Result; got == Hit {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("after the restart: %s", got)
}

// The Redis index finds the nearest vector, keeps its bounds (per group
// and in all), and forgets.
func TestRedisIndex(t *testing.T) {
	rs := redistest.Start(t)
	c, err := queue.Dial(rs.URL, time.Second, time.Second, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	x := NewRedisIndex(c, 300)
	v := func(a, b float64) []float32 { u, _ := normalize([]float64{a, b}); return u }
	if err := x.Add(ctx, "g", "paris", v(1, 0), time.Hour); err != nil {
		t.Fatal(err)
	}
	_ = x.Add(ctx, "g", "berlin", v(0.6, 0.8), time.Hour)
	if k, s, err := x.Nearest(ctx, "g", v(0.99, 0.1), 0.95); err != nil || k != "paris" || s < 0.95 {
		t.Fatalf("nearest: %q %v %v", k, s, err)
	}
	if k, _, _ := x.Nearest(ctx, "g", v(0, 1), 0.95); k != "" {
		t.Fatalf("below the threshold: %q", k)
	}
	if k, _, _ := x.Nearest(ctx, "other", v(1, 0), 0.5); k != "" {
		t.Fatalf("another group: %q", k)
	}
	_ = x.Forget(ctx, "g", "paris")
	if k, _, _ := x.Nearest(ctx, "g", v(1, 0), 0.95); k != "" {
		t.Fatalf("forgotten: %q", k)
	}
	for i := range MaxGroupVectors + 20 {
		_ = x.Add(ctx, "big", fmt.Sprint(i), v(1, float64(i)), time.Hour)
	}
	if n := c.HLen(ctx, RedisPrefix+"sv:big").Val(); n != MaxGroupVectors {
		t.Fatalf("group holds %d", n)
	}
	for i := range 100 {
		_ = x.Add(ctx, fmt.Sprint("g", i), "k", v(1, 0), time.Hour)
	}
	if n := c.ZCard(ctx, RedisPrefix+"sall").Val(); n != 300 {
		t.Fatalf("index holds %d", n)
	}
	if ms := c.PTTL(ctx, RedisPrefix+"sv:g0").Val(); ms <= 0 || ms > time.Hour {
		t.Fatalf("group TTL %v", ms)
	}
}

// On a Redis Cluster every cache key shares one slot (the namespace's
// hash tag), so the Lua scripts that touch an entry, its LRU set and the
// byte totals run there, and a second client sees the first one's entry.
func TestRedisClusterStoresAndHits(t *testing.T) {
	cl := redistest.StartCluster(t)
	dial := func() redis.UniversalClient {
		c, err := redisconn.Dial(redisconn.Options{URL: cl.URL, Cluster: true, Seeds: cl.Seeds,
			CommandTimeout: time.Second, ConnectTimeout: 5 * time.Second, PoolSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a := New(Options{Store: NewRedis(dial()), Timeout: 2 * time.Second})
	b := New(Options{Store: NewRedis(dial()), Timeout: 2 * time.Second})
	ctx := context.Background()
	rq := &Request{Protocol: ProtoChat, Model: "m", Body: []byte(chatBody)}
	l := a.Lookup(ctx, policy(), rq, nil)
	if l.Result != Miss {
		t.Fatalf("first lookup: %s", l.Result)
	}
	serveChat(t, l, `{"choices":[{"finish_reason":"stop"}]}`)
	if l := b.Lookup(ctx, policy(), rq, nil); l.Result != Hit {
		t.Fatalf("another replica on the cluster: %s, want hit", l.Result)
	}
	if n := count(a.m.errors.WithLabelValues("put")) + count(b.m.errors.WithLabelValues("get")); n != 0 {
		t.Fatalf("store errors on the cluster: %v", n)
	}
}
