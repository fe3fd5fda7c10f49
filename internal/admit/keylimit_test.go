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

// TestKeyRateOnTopOfTenant: an issued key's own rpm is a bucket of its
// own (k:<key id>) in the same all-or-nothing decision as its tenant's,
// on every store: the key's third request in a minute is refused as the
// key's limit, without debiting the tenant, while another key of the
// tenant is admitted; a key with no limit of its own meets the tenant's.
func TestKeyRateOnTopOfTenant(t *testing.T) {
	for _, tt := range []struct {
		name  string
		store func(t *testing.T) store.Store
	}{
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
	} {
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
