package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/config"
	"switchboard/internal/store/redistest"
)

func open(t testing.TB, o Options) (*Queue, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	return New(c, o), srv
}

var bg = context.Background()

func job(prov string, tier int) *Job {
	return &Job{ID: NewID(), Provider: prov, Tier: tier, Timeout: time.Minute, Origin: "o1", OToken: "ot",
		Endpoint: "/v1/chat/completions", Tenant: "acme", Request: []byte(`{"secret prompt"}`)}
}

func mustLease(t *testing.T, q *Queue, caps ...Cap) *Lease {
	t.Helper()
	if len(caps) == 0 {
		caps = []Cap{{Provider: "a"}}
	}
	l, err := q.Lease(bg, "w1", caps, 0)
	if err != nil || l == nil {
		t.Fatalf("lease: %v %v", l, err)
	}
	return l
}

// waitFor polls cond (reaper passes run on Redis time, which a test
// cannot move) in short steps up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 250 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// 50 concurrent submits against depth 10 on two queue handles (two
// ingress replicas): exactly 10 accepted, the rest ErrFull.
func TestDepthBoundIsExact(t *testing.T) {
	q1, srv := open(t, Options{Depth: 10})
	c2 := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, PoolSize: 64})
	defer c2.Close()
	q2 := New(c2, Options{Depth: 10})
	var ok, full atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := q1
			if i%2 == 1 {
				q = q2
			}
			_, err := q.Enqueue(bg, job("a", 0))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrFull):
				full.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 10 || full.Load() != 40 {
		t.Fatalf("accepted %d, full %d; want 10 and 40", ok.Load(), full.Load())
	}
}

// Higher tiers lease first; FIFO within a tier.
func TestTierPriorityThenFIFO(t *testing.T) {
	q, _ := open(t, Options{})
	var ids []string
	for _, tier := range []int{0, 0, 2, 1, 2} {
		j := job("a", tier)
		ids = append(ids, j.ID)
		if _, err := q.Enqueue(bg, j); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{ids[2], ids[4], ids[3], ids[0], ids[1]}
	for i, w := range want {
		if l := mustLease(t, q); l.ID != w {
			t.Fatalf("lease %d got %s want %s", i, l.ID, w)
		}
	}
}

// A delivery whose lease expired cannot heartbeat, publish or complete;
// the replacement delivery can, and its terminal is the one stored.
func TestFencingAfterLeaseExpiry(t *testing.T) {
	q, _ := open(t, Options{Lease: 150 * time.Millisecond})
	j := job("a", 0)
	if _, err := q.Enqueue(bg, j); err != nil {
		t.Fatal(err)
	}
	old := mustLease(t, q)
	waitFor(t, "requeue", func() bool { r, _ := q.Reap(bg); return r.Requeued == 1 })
	repl := mustLease(t, q)
	if repl.Gen == old.Gen || repl.Token == old.Token || repl.Deliveries != 2 {
		t.Fatalf("replacement %+v vs old %+v", repl, old)
	}
	if err := q.Heartbeat(bg, old); !errors.Is(err, ErrLost) {
		t.Fatalf("stale heartbeat: %v", err)
	}
	if err := q.Publish(bg, old, KindChunk, 1, []byte("x")); !errors.Is(err, ErrLost) {
		t.Fatalf("stale publish: %v", err)
	}
	if err := q.Complete(bg, old, []byte("stale")); !errors.Is(err, ErrLost) {
		t.Fatalf("stale complete: %v", err)
	}
	if _, err := q.Requeue(bg, old, "x"); !errors.Is(err, ErrLost) {
		t.Fatalf("stale requeue: %v", err)
	}
	if err := q.Complete(bg, repl, []byte("fresh")); err != nil {
		t.Fatal(err)
	}
	if b, _ := q.Terminal(bg, "a", j.ID); string(b) != "fresh" {
		t.Fatalf("terminal %q", b)
	}
}

// A worker lost after its stream's head reached the client is not
// replaced: the reaper cancels the job in the same step as it notices, so
// no second run can start (the origin ends the stream instead).
func TestLostWorkerAfterStreamHeadIsCanceledNotRequeued(t *testing.T) {
	q, _ := open(t, Options{Lease: 150 * time.Millisecond})
	j := job("a", 0)
	if _, err := q.Enqueue(bg, j); err != nil {
		t.Fatal(err)
	}
	l := mustLease(t, q)
	if err := q.Publish(bg, l, KindHead, 0, []byte("head")); err != nil {
		t.Fatal(err)
	}
	var r Reaped
	waitFor(t, "lease expiry", func() bool { r, _ = q.Reap(bg); return r.Requeued+r.Canceled > 0 })
	if r.Requeued != 0 || r.Canceled != 1 {
		t.Fatalf("reaped %+v, want the job canceled and not requeued", r)
	}
	if again, _ := q.Lease(bg, "w2", []Cap{{Provider: "a"}}, 0); again != nil {
		t.Fatalf("a job whose stream reached the client was leased again: %+v", again)
	}
	if st, _, err := q.OriginState(bg, "a", j.ID, j.OToken, false); err != nil || st != "canceled" {
		t.Fatalf("state %q %v, want canceled", st, err)
	}
}

// After max_deliveries lost leases the job is dead-lettered with a
// diagnostic envelope (no prompt); retry runs it again; drop deletes it.
func TestDLQAfterMaxDeliveriesThenRetryAndDrop(t *testing.T) {
	q, _ := open(t, Options{Lease: 100 * time.Millisecond, MaxDeliveries: 2})
	j := job("a", 3)
	if _, err := q.Enqueue(bg, j); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		mustLease(t, q)
		waitFor(t, "lease expiry", func() bool { r, _ := q.Reap(bg); return r.Requeued+r.Dead == 1 })
	}
	dead, err := q.DLQ(bg, 10)
	if err != nil || len(dead) != 1 || dead[0].ID != j.ID || dead[0].Deliveries != 2 || dead[0].Tier != 3 ||
		!strings.Contains(dead[0].Error, "lease expired") {
		t.Fatalf("dlq %+v %v", dead, err)
	}
	if strings.Contains(fmt.Sprint(dead[0]), "secret") {
		t.Fatal("the diagnostic envelope carries the prompt")
	}
	if l, _ := q.Lease(bg, "w", []Cap{{Provider: "a"}}, 0); l != nil {
		t.Fatal("a dead job was leased")
	}
	if err := q.Retry(bg, j.ID); err != nil {
		t.Fatal(err)
	}
	l := mustLease(t, q)
	if l.ID != j.ID || l.Deliveries != 1 || string(l.Request) != `{"secret prompt"}` {
		t.Fatalf("retried lease %+v", l)
	}
	if _, err := q.Requeue(bg, l, "cannot route"); err != nil {
		t.Fatal(err)
	}
	l = mustLease(t, q)
	if dead, err := q.Requeue(bg, l, "cannot route"); err != nil || !dead {
		t.Fatalf("second requeue dead=%v %v", dead, err)
	}
	if err := q.Drop(bg, j.ID); err != nil {
		t.Fatal(err)
	}
	if err := q.Drop(bg, j.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second drop: %v", err)
	}
	st, _ := q.Stats(bg)
	if st.DLQ != 0 || st.DLQBytes != 0 || st.BaseBytes != 0 || st.TerminalBytes != 0 {
		t.Fatalf("accounting after drop: %+v", st)
	}
}

// Canceling a leased job wins over the worker: the worker is told on its
// channel, its later publish and complete fail, and the terminal is the
// cancellation envelope.
func TestCancelLeasedJob(t *testing.T) {
	q, _ := open(t, Options{})
	ps := q.c.Subscribe(bg, q.workerChannel("w1"))
	defer ps.Close()
	if _, err := ps.Receive(bg); err != nil {
		t.Fatal(err)
	}
	j := job("a", 0)
	q.Enqueue(bg, j)
	l := mustLease(t, q)
	if st, err := q.Cancel(bg, "a", j.ID, "wrong-origin-token"); err != nil || st != "lost" {
		t.Fatalf("foreign cancel: %s %v", st, err)
	}
	if st, err := q.Cancel(bg, "a", j.ID, "ot"); err != nil || st != "leased" {
		t.Fatalf("cancel: %s %v", st, err)
	}
	select {
	case m := <-ps.Channel():
		if !strings.HasPrefix(m.Payload, j.ID) {
			t.Fatalf("worker message %q", m.Payload)
		}
	case <-time.After(time.Second):
		t.Fatal("the worker was not told")
	}
	if err := q.Publish(bg, l, KindChunk, 1, []byte("late")); !errors.Is(err, ErrCanceled) {
		t.Fatalf("publish after cancel: %v", err)
	}
	if err := q.Complete(bg, l, []byte("late")); !errors.Is(err, ErrCanceled) {
		t.Fatalf("complete after cancel: %v", err)
	}
	b, _ := q.Terminal(bg, "a", j.ID)
	if e := ParseTerminal(b); e.Kind != "canceled" {
		t.Fatalf("terminal %q", b)
	}
	st, _ := q.Stats(bg)
	if st.Leased != 0 {
		t.Fatalf("still leased: %+v", st)
	}
}

// An origin that stops renewing its claim gets its job canceled.
func TestSilentOriginCancelsItsJob(t *testing.T) {
	q, _ := open(t, Options{OriginLease: 100 * time.Millisecond})
	j := job("a", 0)
	q.Enqueue(bg, j)
	waitFor(t, "origin expiry", func() bool { r, _ := q.Reap(bg); return r.Canceled == 1 })
	if l, _ := q.Lease(bg, "w", []Cap{{Provider: "a"}}, 0); l != nil {
		t.Fatal("a canceled job was leased")
	}
}

// Messages reach the origin only from the owning delivery, in order.
func TestOriginReceivesFencedMessages(t *testing.T) {
	q, _ := open(t, Options{})
	o, err := q.StartOrigin(bg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	j := job("a", 0)
	j.Origin = o.ID
	w, stop := o.Watch(j.ID)
	defer stop()
	q.Enqueue(bg, j)
	l := mustLease(t, q)
	q.Publish(bg, l, KindHead, 0, []byte("head"))
	q.Publish(bg, l, KindChunk, 1, []byte("one"))
	q.Complete(bg, l, []byte("done"))
	var got []string
	for range 3 {
		select {
		case m := <-w.C:
			w.Took(m)
			got = append(got, m.Kind+":"+string(m.Payload))
		case <-time.After(time.Second):
			t.Fatalf("got only %v", got)
		}
	}
	if strings.Join(got, ",") != "H:head,C:one,T:done" {
		t.Fatalf("messages %v", got)
	}
	if st, _, err := q.OriginState(bg, "a", j.ID, j.OToken, true); err != nil || st != "acked" {
		t.Fatalf("ack %s %v", st, err)
	}
	if s, _ := q.Stats(bg); s.Retained != 0 || s.BaseBytes != 0 || s.TerminalBytes != 0 {
		t.Fatalf("after ack %+v", s)
	}
}

// Terminal capacity is reserved at lease: with room for two unary
// reservations, a third job waits until one completes; a terminal over
// its reservation is refused.
func TestTerminalReservation(t *testing.T) {
	q, _ := open(t, Options{UnaryTerminal: 1 << 20, RetainedTerminal: 2 << 20})
	for range 3 {
		q.Enqueue(bg, job("a", 0))
	}
	a, b := mustLease(t, q), mustLease(t, q)
	if l, _ := q.Lease(bg, "w", []Cap{{Provider: "a"}}, 0); l != nil {
		t.Fatal("leased past the terminal pool")
	}
	if err := q.Complete(bg, a, make([]byte, 1<<20+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized terminal: %v", err)
	}
	q.Complete(bg, a, []byte("small"))
	q.Complete(bg, b, []byte("small"))
	mustLease(t, q)
}

// The fleet-wide provider concurrency is the leased count.
func TestProviderConcurrencyIsFleetWide(t *testing.T) {
	q, _ := open(t, Options{})
	for range 3 {
		q.Enqueue(bg, job("a", 0))
	}
	caps := []Cap{{Provider: "a", Limit: 2}}
	mustLease(t, q, caps...)
	mustLease(t, q, caps...)
	if l, _ := q.Lease(bg, "w2", caps, 0); l != nil {
		t.Fatal("leased past max_concurrency")
	}
}

// Retention: finished records are reclaimed to make room; live jobs never
// are, so a full store refuses instead. The DLQ keeps its own bounds.
func TestRetentionAndDLQBoundsUnderFlood(t *testing.T) {
	q, _ := open(t, Options{RetainedJobs: 20, ResultTTL: time.Millisecond, Lease: 50 * time.Millisecond,
		MaxDeliveries: 1, DLQMax: 5})
	accepted, full := 0, 0
	for range 200 {
		_, err := q.Enqueue(bg, job("a", 0))
		switch {
		case err == nil:
			accepted++
			if l, _ := q.Lease(bg, "w", []Cap{{Provider: "a"}}, 0); l != nil {
				if accepted%2 == 0 {
					q.Complete(bg, l, []byte("ok"))
				}
			}
		case errors.Is(err, ErrFull):
			full++
		default:
			t.Fatal(err)
		}
		if s, _ := q.Stats(bg); s.Retained > 20 || s.DLQ > 5+reapBatch {
			t.Fatalf("bound broken: %+v", s)
		}
		q.Reap(bg)
	}
	s, _ := q.Stats(bg)
	if accepted < 20 || s.Retained > 20 || s.DLQ > 5 {
		t.Fatalf("accepted %d full %d stats %+v", accepted, full, s)
	}
}

// A record another program left in a waiting queue is skipped, not run,
// and a namespace in another format is refused.
func TestForeignRecords(t *testing.T) {
	q, _ := open(t, Options{})
	q.SetProviders(func() []string { return []string{"a"} })
	q.c.ZAdd(bg, q.ProviderPrefix("a")+"w", redis.Z{Score: 1, Member: "junk"})
	q.c.HSet(bg, q.ProviderPrefix("a")+"j:junk", "st", "waiting")
	_, err := q.Lease(bg, "w", []Cap{{Provider: "a"}}, 0)
	var sk *Skipped
	if !errors.As(err, &sk) || sk.ID != "junk" {
		t.Fatalf("lease over junk: %v", err)
	}
	if l, err := q.Lease(bg, "w", []Cap{{Provider: "a"}}, 0); l != nil || err != nil {
		t.Fatalf("after skip: %v %v", l, err)
	}
	if err := q.Check(bg); err != nil {
		t.Fatal(err)
	}
	q.c.Set(bg, q.ProviderPrefix("a")+"format", "2", 0)
	if err := q.Check(bg); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("check: %v", err)
	}
	if _, err := q.Enqueue(bg, job("a", 0)); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("enqueue into another format: %v", err)
	}
}

// Freeing a provider slot or terminal capacity wakes the workers when a
// job waits for either, so it is leased at once, not at the next idle
// poll; with nothing waiting, no worker is woken for nothing.
func TestReleaseWakesWorkers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waiting bool
		want    string
	}{{"a job waits", true, "a"}, {"nothing waits", false, "marker"}} {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := open(t, Options{})
			q.Enqueue(bg, job("a", 0))
			l := mustLease(t, q, Cap{Provider: "a", Limit: 1})
			if tc.waiting {
				q.Enqueue(bg, job("a", 0)) // waits for the provider's slot
			}
			ps := q.c.Subscribe(bg, q.wakeChannel())
			defer ps.Close()
			if _, err := ps.Receive(bg); err != nil {
				t.Fatal(err)
			}
			if err := q.Complete(bg, l, []byte("x")); err != nil {
				t.Fatal(err)
			}
			// Messages on a channel arrive in order: the first one read is
			// the release's wake-up if there was one, else this marker.
			q.c.Publish(bg, q.wakeChannel(), "marker")
			select {
			case m := <-ps.Channel():
				if m.Payload != tc.want {
					t.Fatalf("first message %q, want %q", m.Payload, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no message on the wake channel")
			}
		})
	}
}

// Terminals from a foreign or corrupted record read as an error, never as
// something the HTTP server would panic on.
func TestParseTerminalIsTotal(t *testing.T) {
	for _, b := range []string{"", "no newline", "{bad json}\nx", `{"kind":"unary","status":0}` + "\n", `{"kind":"unary","status":1000}` + "\n",
		`{"status":200}` + "\n"} {
		if got := ParseTerminal([]byte(b)); got.Kind != "error" || got.Status != 502 {
			t.Errorf("%q parsed as %+v", b, got)
		}
	}
	ok := (&Terminal{Kind: "unary", Status: 201, Body: []byte("a\nb")}).Encode()
	if got := ParseTerminal(ok); got.Kind != "unary" || got.Status != 201 || string(got.Body) != "a\nb" {
		t.Errorf("round trip: %+v", got)
	}
}

// A waiting job whose record holds something a script computes with that
// is not an integer (gen, dlv, score, ...) goes to the DLQ with the field
// named, its origin is told, and the jobs behind it are still leased: one
// bad record must not stop every worker. A corrupted byte counter or
// sequence restarts instead of failing every transition.
func TestMalformedFieldsGoToTheDLQ(t *testing.T) {
	for _, field := range []string{"gen", "dlv", "score", "dl", "tb", "rb", "to", "tier", "prov"} {
		t.Run(field, func(t *testing.T) {
			q, _ := open(t, Options{})
			bad, good := job("a", 5), job("a", 0) // bad is at the head (higher tier)
			for _, j := range []*Job{bad, good} {
				if _, err := q.Enqueue(bg, j); err != nil {
					t.Fatal(err)
				}
			}
			sub := q.c.Subscribe(bg, q.originChannel("o1"))
			defer sub.Close()
			if _, err := sub.Receive(bg); err != nil {
				t.Fatal(err)
			}
			v := "x1"
			if field == "prov" {
				v = ""
			}
			q.c.HSet(bg, q.ProviderPrefix("a")+"j:"+bad.ID, field, v)
			_, err := q.Lease(bg, "w", []Cap{{Provider: "a"}}, 0)
			var sk *Skipped
			if !errors.As(err, &sk) || sk.ID != bad.ID || !strings.Contains(sk.Why, "field "+field) || !strings.Contains(sk.Why, "dead-lettered") {
				t.Fatalf("lease over a bad %s: %v", field, err)
			}
			l := mustLease(t, q)
			if l.ID != good.ID {
				t.Fatalf("leased %s, want the good job", l.ID)
			}
			d, err := q.DeadJob(bg, bad.ID)
			if err != nil || !strings.Contains(d.Error, "field "+field) {
				t.Fatalf("dlq entry: %+v %v", d, err)
			}
			msg, err := sub.ReceiveMessage(bg)
			if err != nil || !strings.Contains(msg.Payload, bad.ID) || !strings.Contains(msg.Payload, `"kind":"dead"`) {
				t.Fatalf("origin message: %v %v", msg, err)
			}
			if err := q.Retry(bg, bad.ID); !errors.Is(err, ErrMalformed) {
				t.Fatalf("retry of a malformed record: %v", err)
			}
			if err := q.Drop(bg, bad.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("leased", func(t *testing.T) {
		q, _ := open(t, Options{Lease: time.Second})
		j := job("a", 0)
		q.Enqueue(bg, j)
		l := mustLease(t, q)
		q.c.HSet(bg, q.ProviderPrefix("a")+"j:"+j.ID, "score", "NaN")
		if err := q.Heartbeat(bg, l); !errors.Is(err, ErrLost) {
			t.Fatalf("heartbeat on a corrupted record: %v", err)
		}
		waitFor(t, "the reaper's DLQ move", func() bool {
			_, err := q.Reap(bg)
			d, derr := q.DeadJob(bg, j.ID)
			return err == nil && derr == nil && strings.Contains(d.Error, "field score")
		})
	})
	t.Run("counters", func(t *testing.T) {
		q, _ := open(t, Options{})
		q.c.HSet(bg, q.ProviderPrefix("a")+"acct", "term", "garbage", "base", "1e400")
		q.c.Set(bg, q.ProviderPrefix("a")+"seq", "abc", 0)
		j := job("a", 0)
		if _, err := q.Enqueue(bg, j); err != nil {
			t.Fatal(err)
		}
		l := mustLease(t, q)
		if err := q.Complete(bg, l, []byte(`{"kind":"unary","status":200}`+"\n{}")); err != nil {
			t.Fatal(err)
		}
	})
}

// A bound left at zero is the config's default for it: a config whose
// queue section is empty and zero Options give one queue.
func TestZeroOptionsAreTheConfigDefaults(t *testing.T) {
	cfg, err := config.Parse([]byte("providers:\n  a: {type: mock, mock: {tokens: 1}}\nmodels:\n  - name: m\n    providers: [{provider: a, model: x}]\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := OptionsOf(&cfg.Queue)
	want.Prefix = Root
	if got := New(nil, Options{}).Options(); got != want {
		t.Fatalf("zero options became %+v, want the config's defaults %+v", got, want)
	}
}
