package admin

import (
	"context"
	"testing"

	"switchboard/internal/store/redistest"
)

// An alert's audit row touches no record: a replica following the
// changes (Redis) keeps a tenant whose name the row's target repeats, and
// Recent finds the row newest first.
func TestRecordedAlertTouchesNoRecord(t *testing.T) {
	rs := redistest.Start(t)
	a, b := replica(t, rs.URL), replica(t, rs.URL)
	sa := service(a, nil)
	ctx := context.Background()
	if _, err := sa.CreateTenant(ctx, "op", env, []byte(`{"name":"acme","budget_usd":5}`)); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Load(ctx); err != nil || st.Tenants["acme"] == nil {
		t.Fatalf("b: %v", err)
	}
	for _, th := range []float64{50, 80} {
		if err := sa.Record(ctx, AuditEntry{Actor: "alerts", Action: ActionAlert + "budget.threshold", Target: "acme",
			Fields: map[string]any{"threshold_pct": th}}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := b.Load(ctx)
	if err != nil || st.Version != 3 || st.Tenants["acme"] == nil {
		t.Fatalf("after the alerts b reads version %d, tenant acme %v: %v", st.Version, st.Tenants["acme"], err)
	}
	rows, err := service(b, nil).Recent(ctx, ActionAlert, 10, 100)
	if err != nil || len(rows) != 2 || rows[0].Fields["threshold_pct"] != 80.0 || rows[1].Fields["threshold_pct"] != 50.0 {
		t.Fatalf("recent %+v %v", rows, err)
	}
}
