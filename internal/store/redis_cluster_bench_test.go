package store

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/limit"
	"switchboard/internal/store/redistest"
)

// BenchmarkRedisAdmitTopology measures admission decisions per second on
// one redis-server and on a three-master cluster (three replicas beside
// them), started by the same run on the same machine. Each decision is
// the one of BenchmarkRedisAdmit (a budget hold, the rolling day, a
// provider's and a tenant's RPM and TPM), spread over 64 tenants and 8
// providers, as a fleet's traffic is:
//
//   - "owned": only provider and tenant buckets, which the cluster
//     spreads over its masters by hash tag;
//   - "global": also the gateway-wide RPM and TPM buckets, the one key
//     every decision touches (one master's, whatever the number).
//
// 64 callers share each store's client pool (as a busy replica would),
// with a 5 s command timeout so that a loaded machine measures rather
// than falls back.
// On one server a decision is one script; on the cluster it is one per
// owner (two or three), sent together.
func BenchmarkRedisAdmitTopology(b *testing.B) {
	single := redistest.Start(b)
	cluster := redistest.StartCluster(b)
	log := slog.New(slog.DiscardHandler)
	open := func(b *testing.B, o RedisOptions) *Redis {
		o.Log = log
		s, err := OpenRedis(o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	stores := []struct {
		name string
		s    *Redis
	}{
		{"single", open(b, RedisOptions{URL: single.URL, CommandTimeout: 5 * time.Second})},
		{"cluster3", open(b, RedisOptions{URL: cluster.URL, Cluster: true, Seeds: cluster.Seeds, CommandTimeout: 5 * time.Second})},
	}
	r := limit.Rate{Limit: 1 << 40, Window: time.Minute}
	var seq atomic.Int64
	for _, keys := range []string{"owned", "global"} {
		for _, st := range stores {
			b.Run(keys+"/"+st.name, func(b *testing.B) {
				b.SetParallelism(32) // 64 callers on 2 cores
				resetStats(b, st.s.c)
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						n := seq.Add(1)
						t, p := fmt.Sprint("t", n%64), fmt.Sprint("p", n%8)
						ds := []limit.Debit{{Key: "p:" + p + ":rpm", Group: "p:" + p, Rate: r, Cost: 1},
							{Key: "p:" + p + ":tpm", Group: "p:" + p, Rate: r, Cost: 900},
							{Key: "t:" + t + ":rpm", Rate: r, Cost: 1}, {Key: "t:" + t + ":tpm", Rate: r, Cost: 900}}
						if keys == "global" {
							ds = append(ds, limit.Debit{Key: "g:rpm", Rate: r, Cost: 1}, limit.Debit{Key: "g:tpm", Rate: r, Cost: 900})
						}
						a := &Admission{Now: time.Now(), ID: fmt.Sprint("bench-", n), Tenant: t, Provider: p, Model: "m",
							Debits: ds, DailyLimit: 1 << 40, EstTokens: 900, WindowSecs: 86400, Budgeted: true, Budget: 1 << 52,
							Hold: 1000, MaxRetained: 1 << 30}
						d, err := st.s.Admit(ctx, a)
						if err != nil || d.Refused != Admitted {
							b.Error(err, d)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
				total, busiest := scriptTime(b, st.s.c)
				b.ReportMetric(total/float64(b.N), "server-µs/decision")
				b.ReportMetric(busiest/float64(b.N), "busiest-master-µs/decision")
			})
		}
	}
	for _, st := range stores {
		if !st.s.Available() {
			b.Fatalf("%s went unavailable during the benchmark", st.name)
		}
	}
}

// masters runs f on the one server, or on each master of a cluster.
func masters(b *testing.B, c redis.UniversalClient, f func(c *redis.Client) error) {
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error { return f(n) })
	} else {
		err = f(c.(*redis.Client))
	}
	if err != nil {
		b.Fatal(err)
	}
}

func resetStats(b *testing.B, c redis.UniversalClient) {
	masters(b, c, func(n *redis.Client) error { return n.ConfigResetStat(ctx).Err() })
}

// scriptTime is the µs the servers spent in scripts (INFO commandstats:
// EVALSHA and EVAL) since resetStats: in all, and on the busiest master,
// which bounds the rate when each master has a core of its own.
func scriptTime(b *testing.B, c redis.UniversalClient) (total, busiest float64) {
	var mu sync.Mutex
	masters(b, c, func(n *redis.Client) error {
		info, err := n.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		var us float64
		for _, line := range strings.Split(info, "\n") {
			if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
				continue
			}
			for _, f := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
				if v, ok := strings.CutPrefix(f, "usec="); ok {
					x, _ := strconv.ParseFloat(v, 64)
					us += x
				}
			}
		}
		mu.Lock()
		total += us
		busiest = max(busiest, us)
		mu.Unlock()
		return nil
	})
	return total, busiest
}
