package queue

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// standBy makes a lease call for s that finds nothing, so the worker
// stands by in c's queue under its token, which it returns.
func standBy(t *testing.T, q *Queue, s *standby, c Cap) string {
	t.Helper()
	if l, err := q.leaseAmong(bg, "w1", []Cap{c}, 0, nil, s); l != nil || err != nil {
		t.Fatalf("stand by: %+v %v", l, err)
	}
	return s.token(c.Provider)
}

func jobField(t *testing.T, q *Queue, prov, id, f string) string {
	t.Helper()
	return q.c.HGet(bg, q.ProviderPrefix(prov)+"j:"+id, f).Val()
}

func standing(q *Queue, prov, tok string) bool {
	return q.c.HExists(bg, q.ProviderPrefix(prov)+"idle", tok).Val()
}

// A worker idle in a queue is handed the next job by the enqueue itself:
// the job is leased to the worker's standing token in that step, runs
// once, and its origin gets the answer. A stopping worker stands by no
// more.
func TestIdleWorkerIsHandedTheJob(t *testing.T) {
	q, _ := open(t, Options{})
	o, err := q.StartOrigin(bg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	caps := []Cap{{Provider: "a"}, {Provider: "b"}}
	var runs atomic.Int64
	ctx, cancel := context.WithCancel(bg)
	w := &Worker{Q: q, Caps: func() []Cap { return caps }, Concurrency: 1, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Run: func(_ context.Context, d *Delivery) {
			runs.Add(1)
			if err := d.Complete([]byte(`{"kind":"unary","status":200}` + "\n{}")); err != nil {
				t.Error(err)
			}
		}}
	stopped := make(chan struct{})
	go func() { w.Start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	// The worker subscribes, then stands by in both queues (the second by
	// the look its lease call takes at it).
	waitFor(t, "the worker standing by in both queues", func() bool {
		return q.c.HLen(bg, q.ProviderPrefix("a")+"idle").Val() == 1 && q.c.HLen(bg, q.ProviderPrefix("b")+"idle").Val() == 1 &&
			q.c.PubSubNumSub(bg, q.workerChannel(w.ID)).Val()[q.workerChannel(w.ID)] == 1
	})
	for _, prov := range []string{"b", "a"} {
		j := job(prov, 0)
		j.Origin = o.ID
		wt, stop := o.Watch(j.ID)
		if _, err := q.Enqueue(bg, j); err != nil {
			t.Fatal(err)
		}
		// Handed in the enqueue's own step: leased to a token the enqueue
		// recorded, never waiting.
		tok := jobField(t, q, prov, j.ID, "tok")
		if got := q.c.Get(bg, q.ProviderPrefix(prov)+"hd:"+tok).Val(); got != j.ID {
			t.Fatalf("%s: job not handed (hand-off record %q)", prov, got)
		}
		m := <-wt.C
		stop()
		if m.Kind != KindTerminal || ParseTerminal(m.Payload).Status != 200 {
			t.Fatalf("%s: origin got %+v", prov, m)
		}
		if d := jobField(t, q, prov, j.ID, "dlv"); d != "1" {
			t.Fatalf("%s: deliveries %s", prov, d)
		}
		// Stands by again (a new token) before the next job.
		waitFor(t, "the worker standing by again", func() bool {
			return q.c.HLen(bg, q.ProviderPrefix("a")+"idle").Val() == 1 && q.c.HLen(bg, q.ProviderPrefix("b")+"idle").Val() == 1
		})
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
	cancel()
	<-stopped
	for _, p := range []string{"a", "b"} {
		if n := q.c.HLen(bg, q.ProviderPrefix(p)+"idle").Val(); n != 0 {
			t.Errorf("%s: a stopped worker still stands by (%d)", p, n)
		}
	}
}

// A handed delivery reaches the worker by its channel and by the reply of
// any lease call still carrying the token: it runs once, and a token that
// was handed a job never stands by again (a job handed to it would reach
// nobody).
func TestSpentTokenNeverStandsByAgain(t *testing.T) {
	q, _ := open(t, Options{})
	s := &standby{}
	c := Cap{Provider: "a"}
	tok := standBy(t, q, s, c)
	if !standing(q, "a", tok) {
		t.Fatal("not standing by")
	}
	j := job("a", 0)
	if _, err := q.Enqueue(bg, j); err != nil {
		t.Fatal(err)
	}
	if st, got := jobField(t, q, "a", j.ID, "st"), jobField(t, q, "a", j.ID, "tok"); st != "leased" || got != tok {
		t.Fatalf("after enqueue: state %s, token %q", st, got)
	}
	if standing(q, "a", tok) {
		t.Fatal("the token still stands by after its hand-off")
	}
	// Its message lost: the next lease call carrying the token brings it.
	l, err := q.leaseOne(bg, "w1", c, s)
	if err != nil || l == nil || l.ID != j.ID || l.Token != tok || l.Deliveries != 1 {
		t.Fatalf("recovered %+v %v", l, err)
	}
	// A call still carrying the spent token, before and after the job
	// finished: the same delivery is not run twice, and the token does not
	// stand by again.
	stale := func() *Lease {
		t.Helper()
		r, err := leaseReply(scriptLease.Run(bg, q.c, []string{q.ProviderPrefix("a") + "format"},
			q.leaseArgs("w1", tok, c, true, "lease")...), tok)
		if err != nil {
			t.Fatal(err)
		}
		return s.claimed(r)
	}
	if again := stale(); again != nil {
		t.Fatalf("the delivery came twice: %+v", again)
	}
	if err := q.Complete(bg, l, []byte(`{"kind":"unary","status":200}`+"\n")); err != nil {
		t.Fatal(err)
	}
	if again := stale(); again != nil {
		t.Fatalf("a spent token leased %+v", again)
	}
	if standing(q, "a", tok) {
		t.Fatal("a spent token stands by again")
	}
	if next := s.token("a"); next == tok {
		t.Fatal("the worker kept its spent token")
	}
}

// handedJob stands worker w1 by in provider a's queue, enqueues a job
// there, and returns the job and the delivery the enqueue handed to w1.
func handedJob(t *testing.T, q *Queue) (*Job, *Lease) {
	t.Helper()
	s := &standby{}
	standBy(t, q, s, Cap{Provider: "a"})
	j := job("a", 0)
	if _, err := q.Enqueue(bg, j); err != nil {
		t.Fatal(err)
	}
	l, err := q.leaseOne(bg, "w1", Cap{Provider: "a"}, s)
	if err != nil || l == nil {
		t.Fatalf("handed delivery: %+v %v", l, err)
	}
	return j, l
}

// A handed delivery the worker cannot start (no free slot, or stopping) is
// given back uncounted: the job waits again as if never delivered.
func TestHandedJobGivenBackUncounted(t *testing.T) {
	q, _ := open(t, Options{MaxDeliveries: 1})
	j, l := handedJob(t, q)
	if err := q.giveBack(bg, l, "no free slot"); err != nil {
		t.Fatal(err)
	}
	if st, d := jobField(t, q, "a", j.ID, "st"), jobField(t, q, "a", j.ID, "dlv"); st != "waiting" || d != "0" {
		t.Fatalf("after give-back: state %s, deliveries %s", st, d)
	}
	// With max_deliveries 1, a counted give-back would have dead-lettered
	// it; this delivery is its first.
	if l := mustLease(t, q); l.ID != j.ID || l.Deliveries != 1 {
		t.Fatalf("lease after give-back: %+v", l)
	}
}

// The hand-off keeps every rule of a lease: priority (a job already
// waiting goes first, so the new one waits behind it), the provider's
// fleet-wide limit, the terminal pool; and a standing entry that is not
// what a worker writes is dropped, never handed anything.
func TestHandOffKeepsTheLeaseRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		cap   Cap
		setup func(t *testing.T, q *Queue)
	}{
		// A stream waits for room in the terminal pool that a unary
		// answer's smaller reservation would find: the new unary job still
		// waits behind it.
		{name: "a job waits ahead", opts: Options{UnaryTerminal: 100, StreamTerminal: 200, RetainedTerminal: 250},
			cap: Cap{Provider: "a"}, setup: func(t *testing.T, q *Queue) {
				q.Enqueue(bg, job("a", 0))
				mustLease(t, q)
				s := job("a", 0)
				s.Stream = true
				q.Enqueue(bg, s)
			}},
		{name: "provider limit reached", cap: Cap{Provider: "a", Limit: 1}, setup: func(t *testing.T, q *Queue) {
			q.Enqueue(bg, job("a", 0))
			mustLease(t, q)
		}},
		{name: "terminal pool full", opts: Options{UnaryTerminal: 100, RetainedTerminal: 150}, cap: Cap{Provider: "a"},
			setup: func(t *testing.T, q *Queue) {
				q.Enqueue(bg, job("a", 0))
				mustLease(t, q)
			}},
		{name: "foreign standing entry", cap: Cap{Provider: "a"}, setup: func(t *testing.T, q *Queue) {
			p := q.ProviderPrefix("a")
			q.c.HSet(bg, p+"idle", "zz", "not terms")
			q.c.ZAdd(bg, p+"idlex", redis.Z{Score: 1e15, Member: "zz"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := open(t, tc.opts)
			tc.setup(t, q)
			if tc.name != "foreign standing entry" {
				standBy(t, q, &standby{}, tc.cap)
			}
			j := job("a", 0)
			if _, err := q.Enqueue(bg, j); err != nil {
				t.Fatal(err)
			}
			if st := jobField(t, q, "a", j.ID, "st"); st != "waiting" {
				t.Fatalf("state %s, want waiting", st)
			}
			if tc.name == "foreign standing entry" && q.c.HLen(bg, q.ProviderPrefix("a")+"idle").Val() != 0 {
				t.Fatal("the foreign standing entry was kept")
			}
		})
	}
}

// A hand-off read late (the worker paused past its lease, the job since
// leased by another worker) is dropped after a fenced heartbeat instead of
// calling the provider a second time; a late one whose lease still holds
// starts (found from outside: a SIGSTOPped worker ran a finished job).
func TestLateHandOffConfirmedBeforeItStarts(t *testing.T) {
	q, _ := open(t, Options{MaxDeliveries: 3})
	w := &Worker{Q: q, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	j, l := handedJob(t, q)
	if !w.stillHeld(l) {
		t.Fatal("a fresh hand-off was not started")
	}
	late := *l
	late.Now = time.Now().Add(-time.Minute)
	if !w.stillHeld(&late) {
		t.Fatal("a late hand-off whose lease still holds was dropped")
	}
	// The job goes to another worker (as after the first one's lease ran
	// out): the late hand-off is refused by the fence.
	if err := q.giveBack(bg, l, "test"); err != nil {
		t.Fatal(err)
	}
	if l2 := mustLease(t, q); l2.ID != j.ID {
		t.Fatalf("re-lease: %+v", l2)
	}
	if w.stillHeld(&late) {
		t.Fatal("a late hand-off of a job leased elsewhere was started")
	}
}
