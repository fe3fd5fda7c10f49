package store

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/limit"
)

// benchDebits are the six buckets of the admission benchmarks: global,
// provider (under a penalty group) and tenant RPM and TPM, never full.
func benchDebits() []limit.Debit {
	r := limit.Rate{Limit: 1 << 40, Window: time.Minute}
	return []limit.Debit{{Key: "g:rpm", Rate: r, Cost: 1}, {Key: "g:tpm", Rate: r, Cost: 900},
		{Key: "p:x:rpm", Group: "p:x", Rate: r, Cost: 1}, {Key: "p:x:tpm", Group: "p:x", Rate: r, Cost: 900},
		{Key: "t:a:rpm", Rate: r, Cost: 1}, {Key: "t:a:tpm", Rate: r, Cost: 900}}
}

// BenchmarkAdmit is one admission decision with six buckets, a daily
// limit and a budget hold, and its settlement. "serial" is one caller;
// "parallel" is 16 callers (GOMAXPROCS×8 here), as a busy gateway would
// be, so it shows what group commit shares between concurrent callers.
// "async" settles as the gateway does (SettleAsync: the caller does not
// wait for the settlement's write).
func BenchmarkAdmit(b *testing.B) {
	for _, name := range []string{"memory", "sqlite", "sqlite-async"} {
		for _, par := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/parallel=%v", name, par), func(b *testing.B) {
				var s Store = NewMemory()
				if name != "memory" {
					var err error
					if s, err = OpenSQLite(filepath.Join(b.TempDir(), "b.db")); err != nil {
						b.Fatal(err)
					}
				}
				defer s.Close()
				ds := benchDebits()
				var seq atomic.Int64
				one := func() bool {
					i := seq.Add(1)
					now := t0.Add(time.Duration(i) * time.Millisecond)
					a := &Admission{Now: now, ID: fmt.Sprint(i), Tenant: "a", Provider: "x", Model: "m", Debits: ds,
						DailyLimit: 1 << 40, EstTokens: 900, WindowSecs: 86400, Budgeted: true, Budget: 1 << 50, Hold: 1000,
						MaxRetained: 1 << 30}
					d, err := s.Admit(ctx, a)
					if err != nil || d.Refused != Admitted {
						b.Error(err, d)
						return false
					}
					st := &Settlement{Now: now, ID: a.ID, Tenant: "a", Minute: d.Minute, WindowSecs: 86400,
						WindowStart: d.WindowStart, ReservedDelta: -1000, SettledDelta: 500, TokenDelta: -100,
						Recorded: true, Final: true}
					if name == "sqlite-async" {
						s.(AsyncSettler).SettleAsync(st, func(err error) {
							if err != nil {
								b.Error(err)
							}
						})
						return true
					}
					if err := s.Settle(ctx, st); err != nil {
						b.Error(err)
						return false
					}
					return true
				}
				b.ReportAllocs()
				if !par {
					for b.Loop() {
						if !one() {
							return
						}
					}
					return
				}
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() && one() {
					}
				})
				if l, ok := s.(*local); ok && l.group != nil && l.group.txs.Load() > 0 {
					b.ReportMetric(float64(l.group.ops.Load())/float64(l.group.txs.Load()), "ops/commit")
				}
			})
		}
	}
}
