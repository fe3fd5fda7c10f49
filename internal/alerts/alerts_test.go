package alerts

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"switchboard/internal/admit"
	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/health"
	"switchboard/internal/store/redistest"
	"switchboard/internal/tenant"
)

const secret = "0123456789abcdef-secret"

// receiver is a webhook endpoint that verifies every delivery.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	events []Event
	bad    []string
	status atomic.Int32 // answer (0: 204)
	got    chan struct{}
	// now is the receiver's clock (a test with a fake clock signs with it).
	now func() time.Time
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: make(chan struct{}, 100), now: time.Now}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if s := r.status.Load(); s != 0 {
			w.WriteHeader(int(s))
			r.got <- struct{}{}
			return
		}
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := Verify([]byte(secret), req.Header, body, r.now(), 5*time.Minute); err != nil {
			r.bad = append(r.bad, err.Error())
		}
		var ev Event
		if err := json.Unmarshal(body, &ev); err != nil || req.Header.Get(HeaderEvent) != ev.Type || req.Header.Get(HeaderDelivery) != ev.ID {
			r.bad = append(r.bad, "body or headers: "+string(body))
		}
		r.events = append(r.events, ev)
		w.WriteHeader(http.StatusNoContent)
		r.got <- struct{}{}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// wait returns once n more deliveries arrived (or fails after 10 s).
func (r *receiver) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-r.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("a delivery did not arrive")
		}
	}
}

func (r *receiver) snapshot() ([]Event, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...), append([]string(nil), r.bad...)
}

// ledger is a tenant's spend as the admission controller reports it.
type ledger struct {
	settled, reserved atomic.Int64
	start             atomic.Int64
	budget            int64
}

func (l *ledger) Usage(_ context.Context, id *tenant.Identity, _ admit.UsageOptions) (*admit.UsageView, error) {
	b := l.budget
	s := l.start.Load()
	return &admit.UsageView{Spend: &admit.SpendView{WindowStart: s, WindowEnd: s + 3600, SettledNano: l.settled.Load(),
		ReservedNano: l.reserved.Load(), BudgetNano: &b}}, nil
}

func alertsConfig(url string) config.Alerts {
	r := 2
	return config.Alerts{URL: url, Secret: secret, Events: config.AlertEvents, Thresholds: []float64{50, 80, 100},
		Timeout: config.Duration(2 * time.Second), Retries: &r, CheckInterval: config.Duration(time.Second),
		QuietPeriod: config.Duration(15 * time.Minute)}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, n *Notifier) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go n.deliver(ctx)
}

// Three replicas serving one tenant each check its budget; every
// threshold reaches the webhook once, signed, and a new window starts
// the thresholds again.
func TestThresholdsOnceAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	rcv := newReceiver(t)
	l := &ledger{budget: 1_000_000_000} // $1
	l.start.Store(time.Now().Unix())
	b := int64(1_000_000_000)
	id := &tenant.Identity{Tenant: "acme", KeyID: "cfg-1", BudgetNano: &b}
	var recorded atomic.Int32
	var replicas []*Notifier
	for range 3 {
		c := redis.NewClient(&redis.Options{Addr: rs.Addr})
		t.Cleanup(func() { c.Close() })
		n := New(Options{Log: quiet(), Claims: RedisClaims{C: c}, Spend: l,
			Record: func(_ context.Context, ev Event, delivered bool, _ int, _ string) {
				if delivered {
					recorded.Add(1)
				}
			}})
		n.Configure(alertsConfig(rcv.srv.URL))
		start(t, n)
		replicas = append(replicas, n)
	}
	round := func(settled, reserved int64) {
		l.settled.Store(settled)
		l.reserved.Store(reserved)
		var wg sync.WaitGroup
		for _, n := range replicas {
			n.Note(id)
			wg.Add(1)
			go func() { defer wg.Done(); n.Check(context.Background()) }()
		}
		wg.Wait()
	}
	round(300_000_000, 0)           // 30 %: nothing
	round(400_000_000, 900_000_000) // 40 %: a request in flight holds more, which is not spent
	round(550_000_000, 0)
	rcv.wait(t, 1) // 55 %: 50 %
	round(850_000_000, 0)
	rcv.wait(t, 1) // 80 %
	round(1_200_000_000, 0)
	rcv.wait(t, 1)          // 100 %
	round(1_300_000_000, 0) // nothing new
	l.start.Add(3600)       // the next window
	round(600_000_000, 0)
	rcv.wait(t, 1) // 50 % again
	events, bad := rcv.snapshot()
	if len(bad) > 0 {
		t.Fatalf("bad deliveries: %v", bad)
	}
	var got []float64
	ids := map[string]bool{}
	for _, ev := range events {
		if ev.Type != config.AlertBudget || ev.Tenant != "acme" || ev.Scope != "tenant" || ids[ev.ID] {
			t.Fatalf("event %+v", ev)
		}
		ids[ev.ID] = true
		got = append(got, ev.ThresholdPct)
	}
	if len(got) != 4 || got[0] != 50 || got[1] != 80 || got[2] != 100 || got[3] != 50 {
		t.Fatalf("thresholds sent %v, want 50 80 100 50", got)
	}
	if events[0].UsedPct != 55 || events[0].SettledUSD != "0.55" || events[0].ReservedUSD != "0" || events[0].BudgetUSD != "1" {
		t.Fatalf("first event %+v", events[0])
	}
	// Each is recorded after its delivery returned, which may be just
	// after the receiver had it.
	for deadline := time.Now().Add(10 * time.Second); recorded.Load() < 4 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if recorded.Load() != 4 {
		t.Fatalf("recorded %d", recorded.Load())
	}
}

// A webhook that keeps failing: the event is retried, recorded as not
// delivered, and its claim released so that a later check sends it.
func TestFailedDeliveryIsReleased(t *testing.T) {
	rcv := newReceiver(t)
	rcv.status.Store(503)
	l := &ledger{budget: 100}
	l.settled.Store(90)
	b := int64(100)
	id := &tenant.Identity{Tenant: "t", BudgetNano: &b}
	var whys []string
	var mu sync.Mutex
	n := New(Options{Log: quiet(), Spend: l, Backoff: time.Millisecond,
		Record: func(_ context.Context, _ Event, delivered bool, attempts int, why string) {
			mu.Lock()
			defer mu.Unlock()
			if !delivered && attempts == 3 {
				whys = append(whys, why)
			}
		}})
	c := alertsConfig(rcv.srv.URL)
	c.Thresholds = []float64{80}
	n.Configure(c)
	start(t, n)
	n.Note(id)
	n.Check(context.Background())
	rcv.wait(t, 3) // the first try and two retries
	rcv.status.Store(0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := len(whys) == 1
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the failure was not recorded")
		}
		time.Sleep(5 * time.Millisecond) // the delivery goroutine records after its last try
	}
	if whys[0] != "status 503" {
		t.Fatalf("why %q", whys[0])
	}
	n.Note(id)
	n.Check(context.Background())
	rcv.wait(t, 1)
	if ev, _ := rcv.snapshot(); len(ev) != 1 || ev[0].ThresholdPct != 80 {
		t.Fatalf("resent %+v", ev)
	}
}

func TestCircuitAndDLQ(t *testing.T) {
	rcv := newReceiver(t)
	clk := clock.NewFake(time.Now())
	rcv.now = clk.Now
	var size atomic.Int64
	size.Store(3)
	n := New(Options{Clock: clk, Log: quiet(), DLQ: func(context.Context) (int64, error) { return size.Load(), nil }})
	n.Configure(alertsConfig(rcv.srv.URL))
	start(t, n)
	ctx := context.Background()
	open := health.Transition{Time: clk.Now(), Provider: "groq", Kind: health.EventCircuitOpen}
	n.Transition(open)
	n.Transition(health.Transition{Provider: "other", Kind: health.EventCircuitOpen, Fleet: true}) // another replica's
	n.Transition(health.Transition{Provider: "groq", Kind: health.EventCircuitClosed})
	n.circuit(ctx, <-n.circuits)
	if len(n.circuits) != 0 {
		t.Fatal("a fleet or closing transition was queued")
	}
	rcv.wait(t, 1)
	n.circuit(ctx, open) // again within the quiet period: not sent
	clk.Advance(16 * time.Minute)
	n.circuit(ctx, open)
	rcv.wait(t, 1)
	n.Check(ctx) // baseline 3
	n.Check(ctx) // unchanged
	size.Store(5)
	n.Check(ctx)
	rcv.wait(t, 1)
	events, bad := rcv.snapshot()
	if len(bad) > 0 {
		t.Fatalf("bad: %v", bad)
	}
	if len(events) != 3 || events[0].Provider != "groq" || events[1].Provider != "groq" || events[2].Type != config.AlertDLQ ||
		*events[2].DLQSize != 5 || *events[2].DLQPrevious != 3 {
		t.Fatalf("events %+v", events)
	}
}

func TestSQLiteClaims(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clk := clock.NewFake(time.Now())
	c, err := NewSQLiteClaims(db, clk)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, want := range []bool{true, false} {
		if ok, err := c.Claim(ctx, "k", time.Minute); ok != want || err != nil {
			t.Fatalf("claim %d: %v %v", i, ok, err)
		}
	}
	clk.Advance(time.Minute)
	if ok, _ := c.Claim(ctx, "k", time.Minute); !ok {
		t.Fatal("an expired claim was not taken over")
	}
	_ = c.Release(ctx, "k")
	if ok, _ := c.Claim(ctx, "k", time.Minute); !ok {
		t.Fatal("a released claim was not free")
	}
}

func TestSignature(t *testing.T) {
	body := []byte(`{"id":"a"}`)
	now := time.Unix(1_800_000_000, 0)
	h := http.Header{}
	h.Set(HeaderTimestamp, "1800000000")
	h.Set(HeaderSignature, Sign([]byte(secret), now.Unix(), body))
	if err := Verify([]byte(secret), h, body, now, time.Minute); err != nil {
		t.Fatal(err)
	}
	if Verify([]byte(secret), h, []byte(`{"id":"b"}`), now, time.Minute) == nil {
		t.Fatal("a changed body verified")
	}
	if Verify([]byte("another secret..."), h, body, now, time.Minute) == nil {
		t.Fatal("another secret verified")
	}
	if Verify([]byte(secret), h, body, now.Add(10*time.Minute), time.Minute) == nil {
		t.Fatal("an old delivery verified")
	}
}
