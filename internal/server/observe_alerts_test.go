package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/admin"
	"switchboard/internal/alerts"
	"switchboard/internal/config"
	"switchboard/internal/store/redistest"
)

// TestBudgetAlertsOnceAcrossFleet: three replicas on one Redis serve one
// tenant whose budget fills 5 % per request; each replica checks the
// budget after serving it. The webhook receives each threshold (10, 25,
// 50 %) exactly once, signed, and the replica that sent it recorded it
// in its audit log, shown on /admin.
func TestBudgetAlertsOnceAcrossFleet(t *testing.T) {
	const secret = "fleet-alert-secret-0123"
	var mu sync.Mutex
	var got []alerts.Event
	var bad []string
	arrived := make(chan struct{}, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := alerts.Verify([]byte(secret), r.Header, body, time.Now(), time.Minute); err != nil {
			bad = append(bad, err.Error())
		}
		var ev alerts.Event
		_ = json.Unmarshal(body, &ev)
		got = append(got, ev)
		w.WriteHeader(http.StatusNoContent)
		arrived <- struct{}{}
	}))
	defer hook.Close()

	srv := redistest.Start(t)
	// 8 prompt and 10 completion tokens at 1000 USD per million: 18e6
	// nano-USD a request, 5 % of the budget. Each reserves 168e6 first
	// (its input bound and max_tokens), so the 12th does not fit.
	yaml := pricedYAML("auth:\n  keys:\n    k: {tenant: acme, budget_usd: 0.36}\n    k-admin: {tenant: ops, role: admin}\n" +
		"alerts: {url: '" + hook.URL + "', secret: " + secret + ", events: [budget.threshold], thresholds: [10, 25, 50], check_interval: 1h}\n")
	fleet := startFleet(t, srv, 3, yaml)
	var notifiers []*alerts.Notifier
	for _, g := range fleet {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { c.Close() })
		n := alerts.New(alerts.Options{Log: g.Log, Claims: alerts.RedisClaims{C: c}, Spend: g.Admission, Record: g.RecordAlert})
		g.SetAlerts(n)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go n.Run(ctx)
		notifiers = append(notifiers, n)
	}
	checkAll := func() {
		var wg sync.WaitGroup
		for _, n := range notifiers {
			wg.Add(1)
			go func() { defer wg.Done(); n.Check(context.Background()) }()
		}
		wg.Wait()
	}
	// until checks every replica until want deliveries have arrived: a
	// replica notes its caller as its handler returns, which may be just
	// after the client has the answer.
	until := func(want int) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			checkAll()
			select {
			case <-arrived:
				if want--; want == 0 {
					return
				}
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("a threshold was not sent")
			}
		}
	}
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	served := 0
	round := func() {
		for _, g := range fleet {
			a, err := send(g.URL, body, "x-api-key", "k")
			if err != nil {
				t.Fatal(err)
			}
			if a.Status == 200 {
				served++
			}
		}
	}
	// serveTo sends round the fleet until n requests in all were served:
	// under a loaded machine a request may meet a 503 (Redis slower than
	// its command timeout), which spends nothing and would leave a
	// threshold uncrossed.
	serveTo := func(n int) {
		for tries := 0; served < n; tries++ {
			if tries == 20 {
				t.Fatalf("only %d of %d requests served", served, n)
			}
			round()
		}
	}
	serveTo(3) // 15 %
	until(1)
	serveTo(6) // 30 %
	until(1)
	serveTo(10) // the 10th: 50 %
	round()     // the 12th does not fit
	until(1)
	for range 5 {
		checkAll()
	}
	time.Sleep(50 * time.Millisecond) // a duplicate would have been sent by now: deliveries run at once
	mu.Lock()
	events, badSigs := append([]alerts.Event(nil), got...), append([]string(nil), bad...)
	mu.Unlock()
	if served < 10 || served > 11 || len(badSigs) > 0 {
		// 10 or 11: the 11th fits only when the 10th's reservation was
		// settled before it arrived (settlement follows the answer).
		t.Fatalf("served %d (want 10 or 11), bad signatures %v", served, badSigs)
	}
	var th []float64
	for _, ev := range events {
		th = append(th, ev.ThresholdPct)
		if ev.Tenant != "acme" || ev.Type != config.AlertBudget || ev.BudgetUSD != "0.36" {
			t.Fatalf("event %+v", ev)
		}
	}
	if len(th) != 3 || th[0] != 10 || th[1] != 25 || th[2] != 50 {
		t.Fatalf("thresholds delivered %v, want 10 25 50 once each", th)
	}
	// Each is in the audit log of the replica that sent it, and on
	// /admin (recorded once its delivery returned: read until all are).
	var rows int
	for deadline := time.Now().Add(10 * time.Second); ; {
		rows = 0
		for _, g := range fleet {
			a := g.get("/admin/v1/overview", "x-api-key", "k-admin")
			var ov struct{ Alerts []admin.AuditEntry }
			_ = json.Unmarshal([]byte(a.Body), &ov)
			for _, r := range ov.Alerts {
				if r.Action != "alert.budget.threshold" || r.Target != "tenant:acme" || r.Fields["delivered"] != true {
					t.Fatalf("audit row %+v", r)
				}
			}
			rows += len(ov.Alerts)
		}
		if rows >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rows != 3 {
		t.Fatalf("%d alert rows in the replicas' audit logs, want 3", rows)
	}
}
