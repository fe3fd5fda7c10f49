package admit

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/store"
	"switchboard/internal/store/redistest"
	"switchboard/internal/tenant"
)

type storeCase struct {
	name  string
	store func(t *testing.T) store.Store
}

// stores are the admission stores a key's own limits run on.
func stores() []storeCase {
	return []storeCase{
		{"memory", func(*testing.T) store.Store { return store.NewMemory() }},
		{"sqlite", func(t *testing.T) store.Store {
			st, err := store.OpenSQLite(filepath.Join(t.TempDir(), "s.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
		{"redis", func(t *testing.T) store.Store {
			srv := redistest.Start(t)
			st, err := store.OpenRedis(store.RedisOptions{URL: srv.URL, CommandTimeout: 10 * time.Second, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
	}
}

// TestKeyRateOnTopOfTenant: an issued key's own rpm is a bucket of its
// own (k:<key id>) in the same all-or-nothing decision as its tenant's,
// on every store: the key's third request in a minute is refused as the
// key's limit, without debiting the tenant, while another key of the
// tenant is admitted; a key with no limit of its own meets the tenant's.
func TestKeyRateOnTopOfTenant(t *testing.T) {
	for _, tt := range stores() {
		t.Run(tt.name, func(t *testing.T) {
			e := setupWith(t, tt.store(t), clock.NewFake(t0), "")
			n := func(v int64) *int64 { return &v }
			tight := &tenant.Identity{Tenant: "team", RPM: n(3), KeyID: "key-tight", KeyRPM: n(2), BudgetWindowSecs: 86400}
			other := &tenant.Identity{Tenant: "team", RPM: n(3), KeyID: "key-other", BudgetWindowSecs: 86400}
			for i := range 2 {
				pm, ref := e.c.Admit(ctx, attempt(tight, "m1"))
				if ref != nil {
					t.Fatalf("request %d of the key: %+v", i+1, ref)
				}
				pm.Settle(Usage{Input: 1, Output: 1})
			}
			_, ref := e.c.Admit(ctx, attempt(tight, "m1"))
			if ref == nil || ref.Status != 429 || ref.Code != CodeRateLimit || ref.RetryAfter < 1 || !strings.Contains(ref.Message, "key's limit") {
				t.Fatalf("third of the key = %+v, want 429 naming the key's limit", ref)
			}
			// The refusal debited nothing: the tenant's third slot is free.
			pm, ref := e.c.Admit(ctx, attempt(other, "m1"))
			if ref != nil {
				t.Fatalf("another key of the tenant: %+v", ref)
			}
			pm.Settle(Usage{Input: 1, Output: 1})
			// The tenant's 3 are used: its limit refuses the key with no limit of its own.
			_, ref = e.c.Admit(ctx, attempt(other, "m1"))
			if ref == nil || ref.Code != CodeRateLimit || strings.Contains(ref.Message, "key's limit") {
				t.Fatalf("tenant's limit = %+v", ref)
			}
		})
	}
}

// TestKeyLedgerBesideTenant: an issued key's own budget and daily count
// are a second admission in the key's ledger: a request is charged to
// both ledgers when it settles; the key's budget refuses while its tenant
// has budget left; a refusal by the tenant's decision releases the key's
// hold; and the key's daily count refuses on its own.
func TestKeyLedgerBesideTenant(t *testing.T) {
	for _, tt := range stores() {
		t.Run(tt.name, func(t *testing.T) {
			e := setupWith(t, tt.store(t), clock.NewFake(t0), pricing)
			r := reservation()
			cost := int64(10*10_000 + 10*20_000) // of the settled usage below
			n := func(v int64) *int64 { return &v }
			id := &tenant.Identity{Tenant: "team", RPM: n(3), BudgetNano: n(100 * r), BudgetWindowSecs: 86400, KeyID: "key-a",
				KeyBudgetNano: n(r + cost/2), KeyBudgetWindowSecs: 3600}
			ledger := func(name string, secs int64) (reserved, settled int64) {
				u, err := e.st.Usage(ctx, store.UsageQuery{Now: e.clk.Now(), Tenant: name, WindowSecs: secs})
				if err != nil {
					t.Fatal(err)
				}
				return u.Reserved, u.Settled
			}
			pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
			if ref != nil {
				t.Fatal(ref)
			}
			if res, _ := ledger(id.KeyLedger(), 3600); res != r {
				t.Fatalf("key ledger reserved %d, want %d", res, r)
			}
			pm.Settle(Usage{Input: 10, Output: 10})
			for _, l := range []struct {
				name string
				secs int64
			}{{id.KeyLedger(), 3600}, {"team", 86400}} {
				// Redis applies the settlement asynchronously.
				waitFor(t, func() bool { res, set := ledger(l.name, l.secs); return res == 0 && set == cost })
			}
			// What is left of the key's budget is less than a reservation.
			_, ref = e.c.Admit(ctx, attempt(id, "m1"))
			if ref == nil || ref.Code != CodeRequestTooCostly || !strings.Contains(ref.Message, "this key's own spend budget") {
				t.Fatalf("key budget = %+v", ref)
			}
			// The tenant's rpm (3) refuses after the key's admission: the
			// key's hold is released.
			id.KeyBudgetNano = n(10 * r)
			for range 2 {
				pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
				if ref != nil {
					t.Fatal(ref)
				}
				pm.Fail()
			}
			_, ref = e.c.Admit(ctx, attempt(id, "m1"))
			if ref == nil || ref.Code != CodeRateLimit {
				t.Fatalf("tenant rpm = %+v", ref)
			}
			waitFor(t, func() bool { res, set := ledger(id.KeyLedger(), 3600); return res == 0 && set == cost })
			// The key's daily count: 3 requests so far (the one the
			// tenant's rpm refused is not one).
			e.clk.Advance(2 * time.Minute)
			if v, _ := e.c.KeyUsage(ctx, id); v == nil || v.RequestsToday == nil || *v.RequestsToday != 3 {
				t.Fatalf("key requests today = %+v", v)
			}
			id.KeyDailyRequests = n(3)
			_, ref = e.c.Admit(ctx, attempt(id, "m1"))
			if ref == nil || ref.Code != CodeDaily || !strings.Contains(ref.Message, "key's own limit") {
				t.Fatalf("key daily = %+v", ref)
			}
		})
	}
}
