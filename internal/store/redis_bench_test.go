package store

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"switchboard/internal/limit"
	"switchboard/internal/store/redistest"
)

// BenchmarkRedisAdmit measures admission decisions against a real
// redis-server on loopback: each decision is one EVALSHA of
// redis_admit.lua over six buckets, the rolling-day count and a budget
// hold (the same admission as BenchmarkAdmit). "serial" is one caller, so
// its rate is bounded by the round trip; "parallel" is GOMAXPROCS×8
// callers on one client pool, as a busy replica would be, so its rate is
// what one Redis core sustains. "metered" is what a metered request of the
// bench's gateway costs (see bench/metered.go): a tenant's RPM and TPM
// buckets and a provider's unlimited RPM behind its penalty, the rolling
// day and a budget hold, then the attempt's final settlement
// (SettleAsync, as the gateway sends it), from GOMAXPROCS×8 callers.
//
// Each reports decisions/s; server-µs/decision is Redis's own time in the
// scripts (INFO commandstats: wall time inside the call, so a busy
// machine inflates it), redis-cpu-µs/op the redis-server process's CPU
// (INFO cpu) per decision or metered request, and client-cpu-µs/op this
// process's CPU (the store, go-redis and the benchmark loop), and
// redis-calls/op the commands the scripts ran per decision or request.
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
	lim := limit.Rate{Limit: 1_000_000_000, Window: time.Minute}
	meteredDebits := []limit.Debit{{Key: "t:bench:rpm", Rate: lim, Cost: 1},
		{Key: "p:fake:rpm", Group: "p:fake", Rate: limit.Rate{Limit: limit.Unlimited, Window: time.Minute}, Cost: 1},
		{Key: "t:bench:tpm", Rate: limit.Rate{Limit: 1 << 40, Window: time.Minute}, Cost: 94}}
	metered := func(b *testing.B) bool {
		a := &Admission{Now: time.Now(), ID: fmt.Sprint("bench-", seq.Add(1)), Tenant: "bench", Provider: "fake", Model: "m",
			Debits: meteredDebits, DailyLimit: 1 << 30, EstTokens: 94, WindowSecs: 86400, Budgeted: true, Budget: 1 << 50,
			Hold: 328000, MaxRetained: 100_000}
		d, err := s.Admit(ctx, a)
		if err != nil || d.Refused != Admitted {
			b.Error(err, d)
			return false
		}
		s.SettleAsync(&Settlement{Now: a.Now, ID: a.ID, Tenant: a.Tenant, Minute: d.Minute, WindowSecs: 86400,
			WindowStart: d.WindowStart, ReservedDelta: -d.Held, SettledDelta: 284000, TokenDelta: 60,
			Adjust:   []limit.Debit{{Key: "t:bench:tpm", Rate: meteredDebits[2].Rate, Cost: 60}},
			Recorded: d.Recorded, Final: true}, func(err error) {
			if err != nil {
				b.Error(err)
			}
		})
		return true
	}
	redisCPU := func() float64 {
		info := s.c.Info(ctx, "cpu").Val()
		var sum float64
		for _, l := range strings.Fields(info) {
			for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
				if v, ok := strings.CutPrefix(l, k); ok {
					f, _ := strconv.ParseFloat(v, 64)
					sum += f
				}
			}
		}
		return sum
	}
	ownCPU := func() float64 {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	var start time.Time
	var cpu0, own0 float64
	begin := func() {
		s.c.ConfigResetStat(ctx)
		cpu0, own0, start = redisCPU(), ownCPU(), time.Now()
	}
	report := func(b *testing.B) {
		// Every settlement queued is applied before the figures are read.
		if _, err := s.Usage(ctx, UsageQuery{Now: time.Now(), Tenant: "bench", WindowSecs: 86400}); err != nil {
			b.Error(err)
		}
		el := time.Since(start)
		b.ReportMetric(float64(b.N)/el.Seconds(), "decisions/s")
		b.ReportMetric((redisCPU()-cpu0)*1e6/float64(b.N), "redis-cpu-µs/op")
		b.ReportMetric((ownCPU()-own0)*1e6/float64(b.N), "client-cpu-µs/op")
		info := s.c.Info(ctx, "commandstats").Val()
		// Commands the scripts ran (every command but the scripts' own
		// calls, INFO and CONFIG), per decision or metered request.
		var inner int64
		for _, l := range strings.Fields(info) {
			name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":calls=")
			if !ok || name == "evalsha" || name == "eval" || name == "info" || strings.HasPrefix(name, "config") {
				continue
			}
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			inner += n
		}
		b.ReportMetric(float64(inner)/float64(b.N), "redis-calls/op")
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
		begin()
		for b.Loop() {
			if !decide(b) {
				return
			}
		}
		report(b)
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(8)
		begin()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() && decide(b) {
			}
		})
		report(b)
	})
	b.Run("metered", func(b *testing.B) {
		b.SetParallelism(8)
		begin()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() && metered(b) {
			}
		})
		report(b)
	})
	if !s.Available() {
		b.Fatal("redis went unavailable during the benchmark")
	}
}
