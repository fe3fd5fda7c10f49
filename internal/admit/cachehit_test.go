package admit

import (
	"testing"

	"switchboard/internal/clock"
	"switchboard/internal/tenant"
)

// TestCountHit: a cache hit is a request in the key's and the tenant's
// rpm buckets, on every store: hits and attempts share them, a hit over
// the limit gets the same 429, and hits leave the daily count, tokens and
// spend alone.
func TestCountHit(t *testing.T) {
	for _, tt := range stores() {
		t.Run(tt.name, func(t *testing.T) {
			e := setupWith(t, tt.store(t), clock.NewFake(t0), "")
			n := func(v int64) *int64 { return &v }
			id := &tenant.Identity{Tenant: "team", RPM: n(3), DailyRequests: n(1), KeyID: "key-a", BudgetWindowSecs: 86400}
			for i := range 2 {
				adv, ref := e.c.CountHit(ctx, id)
				if ref != nil || !adv.OK || adv.Limit != 3 || adv.Remaining != int64(2-i) {
					t.Fatalf("hit %d: %+v %+v", i+1, adv, ref)
				}
			}
			// The third request of the minute is an attempt: admitted (the
			// daily count of one is the attempt's, untouched by hits).
			pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
			if ref != nil {
				t.Fatalf("attempt after two hits: %+v", ref)
			}
			pm.Settle(Usage{Input: 1, Output: 1})
			if _, ref := e.c.CountHit(ctx, id); ref == nil || ref.Status != 429 || ref.Code != CodeRateLimit || ref.RetryAfter < 1 {
				t.Fatalf("fourth request (a hit) = %+v, want 429", ref)
			}
			u, err := e.c.Usage(ctx, id, UsageOptions{})
			if err != nil || u.RequestsToday != 1 {
				t.Fatalf("requests today %d (%v): hits counted as attempts", u.RequestsToday, err)
			}
			// A key with its own rpm: its bucket too.
			own := &tenant.Identity{Tenant: "solo", KeyID: "key-own", KeyRPM: n(1), BudgetWindowSecs: 86400}
			if _, ref := e.c.CountHit(ctx, own); ref != nil {
				t.Fatal(ref)
			}
			if _, ref := e.c.CountHit(ctx, own); ref == nil || ref.Status != 429 {
				t.Fatalf("key's own rpm: %+v", ref)
			}
			// No limit, no auth: nothing to count, nothing refused.
			for _, free := range []*tenant.Identity{nil, {Tenant: "free", KeyID: "key-free"}} {
				if adv, ref := e.c.CountHit(ctx, free); ref != nil || adv.OK {
					t.Fatalf("%+v: %+v %+v", free, adv, ref)
				}
			}
			zero := &tenant.Identity{Tenant: "zero", RPM: n(0), KeyID: "key-z"}
			if _, ref := e.c.CountHit(ctx, zero); ref == nil || ref.Status != 429 {
				t.Fatalf("rpm 0: %+v", ref)
			}
		})
	}
}

func TestCostNano(t *testing.T) {
	e := setup(t, "pricing: {m1: {demo: {input: 1, output: 2}}}\n")
	bill := int64(777)
	if n, ok := e.c.CostNano("m1", "demo", Usage{Input: 1000, Output: 1000, CostNanoUSD: &bill}); !ok || n != 777 {
		t.Fatalf("bill: %d %v", n, ok)
	}
	if n, ok := e.c.CostNano("m1", "demo", Usage{Input: 1_000_000, Output: 1_000_000}); !ok || n != 3_000_000_000 {
		t.Fatalf("catalog: %d %v", n, ok)
	}
	if _, ok := e.c.CostNano("m2", "unknown-model", Usage{Input: 1}); ok {
		t.Fatal("an unknown model was priced")
	}
}
