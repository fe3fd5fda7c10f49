package store

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/store/redistest"
)

// BenchmarkRedisAdmit measures admission decisions against a real
// redis-server on loopback: each decision is one EVALSHA of
// redis_admit.lua over six buckets, the rolling-day count and a budget
// hold (the same admission as BenchmarkAdmit). "serial" is one caller, so
// its rate is bounded by the round trip; "parallel" is GOMAXPROCS×8
// callers on one client pool, as a busy replica would be, so its rate is
// what one Redis core sustains. Each reports decisions/s.
func BenchmarkRedisAdmit(b *testing.B) {
	srv := redistest.Start(b)
	s, err := OpenRedis(RedisOptions{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ds := benchDebits()
	var seq atomic.Int64
	decide := func(b *testing.B) bool {
		a := &Admission{Now: time.Now(), ID: fmt.Sprint("bench-", seq.Add(1)), Tenant: "a", Provider: "x", Model: "m",
			Debits: ds, DailyLimit: 1 << 40, EstTokens: 900, WindowSecs: 86400, Budgeted: true, Budget: 1 << 52,
			Hold: 1000, MaxRetained: 1 << 30}
		d, err := s.Admit(ctx, a)
		if err != nil || d.Refused != Admitted {
			b.Error(err, d) // Error, not Fatal: RunParallel's goroutines call it too
			return false
		}
		return true
	}
	// server-µs/decision is Redis's own time in the script (INFO
	// commandstats), apart from the round trip and the client.
	report := func(b *testing.B, start time.Time) {
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
		info := s.c.Info(ctx, "commandstats").Val()
		if i := strings.Index(info, "cmdstat_evalsha:"); i >= 0 {
			for _, f := range strings.Split(strings.Fields(info[i+len("cmdstat_evalsha:"):])[0], ",") {
				if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
					if us, err := strconv.ParseFloat(v, 64); err == nil {
						b.ReportMetric(us, "server-µs/decision")
					}
				}
			}
		}
	}
	b.Run("serial", func(b *testing.B) {
		s.c.ConfigResetStat(ctx)
		start := time.Now()
		for b.Loop() {
			if !decide(b) {
				return
			}
		}
		report(b, start)
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(8)
		s.c.ConfigResetStat(ctx)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() && decide(b) {
			}
		})
		report(b, start)
	})
	if !s.Available() {
		b.Fatal("redis went unavailable during the benchmark")
	}
}
