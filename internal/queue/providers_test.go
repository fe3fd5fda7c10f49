package queue

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Each provider's queue keeps all of its keys under its own prefix (its
// own hash tag): no key of the namespace is shared between providers.
func TestEachProviderQueueHasItsOwnKeys(t *testing.T) {
	q, _ := open(t, Options{})
	for _, p := range []string{"a", "b", "x}y"} {
		if _, err := q.Enqueue(bg, job(p, 0)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := q.Lease(bg, "w", []Cap{{Provider: "x}y"}}, 0)
	if err != nil || l == nil || l.Provider != "x}y" {
		t.Fatalf("lease: %+v %v", l, err)
	}
	if err := q.Complete(bg, l, []byte("done")); err != nil {
		t.Fatal(err)
	}
	keys := q.c.Keys(bg, "*").Val()
	for _, k := range keys {
		if k == q.directory() {
			continue
		}
		owners := 0
		for _, p := range []string{"a", "b", "x}y"} {
			if strings.HasPrefix(k, q.ProviderPrefix(p)) {
				owners++
			}
		}
		if owners != 1 {
			t.Errorf("key %q belongs to %d provider queues, want 1", k, owners)
		}
	}
	if b, _ := q.Terminal(bg, "x}y", l.ID); string(b) != "done" {
		t.Fatalf("terminal %q", b)
	}
}

// Leasing across provider queues keeps the rotation: from start, the
// first provider with room and a waiting job wins, whether it is the
// first one tried or found by the look at the others; a provider at its
// fleet-wide limit is passed over.
func TestLeaseRotatesOverProviderQueues(t *testing.T) {
	q, _ := open(t, Options{})
	caps := []Cap{{Provider: "a"}, {Provider: "b", Limit: 1}, {Provider: "c"}}
	enq := func(p string) string {
		j := job(p, 0)
		if _, err := q.Enqueue(bg, j); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	b1, _, c1 := enq("b"), enq("b"), enq("c")
	for i, tc := range []struct {
		start int
		want  string
	}{
		{0, b1}, // a is empty: b, the next in rotation, found by the look
		{0, c1}, // b is at its limit of 1: c
		{1, ""}, // nothing leasable: b at its limit, a and c empty
	} {
		l, err := q.Lease(bg, "w", caps, tc.start)
		if err != nil {
			t.Fatalf("lease %d: %v", i, err)
		}
		if got := ""; l != nil {
			got = l.ID
			if got != tc.want {
				t.Fatalf("lease %d got %s (%s), want %s", i, got, l.Provider, tc.want)
			}
		} else if tc.want != "" {
			t.Fatalf("lease %d got nothing, want %s", i, tc.want)
		}
	}
	a1 := enq("a")
	if l, _ := q.Lease(bg, "w", caps, 2); l == nil || l.ID != a1 {
		t.Fatalf("from c (empty), the rotation reaches a: %+v", l)
	}
}

// A worker's memory of busy queues never leases past the rotation's
// answer: with every queue busy, successive leases take turns.
func TestWorkerHintKeepsTurns(t *testing.T) {
	q, _ := open(t, Options{})
	caps := []Cap{{Provider: "a"}, {Provider: "b"}}
	for range 4 {
		for _, p := range []string{"a", "b"} {
			if _, err := q.Enqueue(bg, job(p, 0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var b busy
	b.set("a", true)
	b.set("b", true)
	var got []string
	for i := range 6 {
		l, err := q.leaseAmong(bg, "w", caps, i, &b, nil)
		if err != nil || l == nil {
			t.Fatalf("lease %d: %v %v", i, l, err)
		}
		got = append(got, l.Provider)
	}
	if strings.Join(got, "") != "ababab" {
		t.Fatalf("turns %v", got)
	}
}

// Stats sum the provider queues and show each; the DLQ is listed over
// every queue, oldest first, and a fresh handle with no config (the
// operator's CLI) finds a dead job by its id alone, through the
// directory.
func TestStatsAndDLQSpanProviderQueues(t *testing.T) {
	q, srv := open(t, Options{MaxDeliveries: 1})
	var dead []string
	for _, p := range []string{"b", "a"} {
		j := job(p, 0)
		if _, err := q.Enqueue(bg, j); err != nil {
			t.Fatal(err)
		}
		l, err := q.Lease(bg, "w", []Cap{{Provider: p}}, 0)
		if err != nil || l == nil {
			t.Fatal(l, err)
		}
		if d, err := q.Requeue(bg, l, "cannot route"); err != nil || !d {
			t.Fatalf("requeue: %v %v", d, err)
		}
		dead = append(dead, j.ID)
	}
	q.Enqueue(bg, job("a", 0))
	st, err := q.Stats(bg)
	if err != nil || st.DLQ != 2 || st.Retained != 1 || st.Waiting["a"] != 1 || st.Queues["b"].DLQ != 1 || st.Queues["a"].DLQ != 1 ||
		st.DLQBytes != st.Queues["a"].DLQBytes+st.Queues["b"].DLQBytes || st.DLQBytes == 0 {
		t.Fatalf("stats %+v %v", st, err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer c.Close()
	cli := New(c, Options{})
	list, err := cli.DLQ(bg, 10)
	if err != nil || len(list) != 2 || list[0].DeadAt.After(list[1].DeadAt) ||
		!slices.ContainsFunc(list, func(d Dead) bool { return d.ID == dead[0] && d.Provider == "b" }) ||
		!slices.ContainsFunc(list, func(d Dead) bool { return d.ID == dead[1] && d.Provider == "a" }) {
		t.Fatalf("dlq %+v %v", list, err)
	}
	if d, err := cli.DeadJob(bg, dead[1]); err != nil || d.Provider != "a" {
		t.Fatalf("dead job %+v %v", d, err)
	}
	if err := cli.Retry(bg, dead[0]); err != nil {
		t.Fatal(err)
	}
	if l, _ := q.Lease(bg, "w", []Cap{{Provider: "b"}}, 0); l == nil || l.ID != dead[0] {
		t.Fatalf("retried job not in b's queue: %+v", l)
	}
	if err := cli.Drop(bg, dead[1]); err != nil {
		t.Fatal(err)
	}
	if err := cli.Drop(bg, "no-such-job"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("drop of an unknown id: %v", err)
	}
}

// The reaper walks every provider queue; a queue that the config does not
// name leaves the directory once it is empty, a configured one stays.
func TestReaperWalksProviderQueues(t *testing.T) {
	q, _ := open(t, Options{Lease: 100 * time.Millisecond})
	q.SetProviders(func() []string { return []string{"a"} })
	for _, p := range []string{"a", "gone"} {
		q.Enqueue(bg, job(p, 0))
		if l, err := q.Lease(bg, "w", []Cap{{Provider: p}}, 0); err != nil || l == nil {
			t.Fatal(l, err)
		}
	}
	var total Reaped
	waitFor(t, "both leases requeued", func() bool { r, _ := q.Reap(bg); total.add(r); return total.Requeued == 2 })
	for _, p := range []string{"a", "gone"} {
		l, _ := q.Lease(bg, "w", []Cap{{Provider: p}}, 0)
		if l == nil {
			t.Fatalf("%s's job was not requeued", p)
		}
		q.Complete(bg, l, []byte("x"))
		st, _, _ := q.OriginState(bg, p, l.ID, "ot", true)
		if st != "acked" {
			t.Fatalf("ack %s", st)
		}
	}
	if _, err := q.Reap(bg); err != nil {
		t.Fatal(err)
	}
	if got, _ := q.Providers(bg); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("queues after the reap %v, want [a]", got)
	}
}

// trips counts a client's round trips (a command or a pipeline each),
// a new connection's handshake aside.
type trips struct{ n atomic.Int64 }

func handshake(c redis.Cmder) bool { return c.Name() == "hello" || c.Name() == "client" }

func (h *trips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !handshake(cmds[0]) {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// A worker that knows which queue has work (a wake-up named it) leases
// from it in one round trip however many providers it serves, as one
// script did when the queue was one slot; without that knowledge, a job
// in another queue than the first tried costs a second.
func TestLeaseFromTheBusyQueueIsOneRoundTrip(t *testing.T) {
	q, _ := open(t, Options{})
	caps := []Cap{{Provider: "a"}, {Provider: "b"}, {Provider: "c"}, {Provider: "d"}}
	for range 2 {
		if _, err := q.Enqueue(bg, job("d", 0)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Lease(bg, "w", []Cap{{Provider: "d"}}, 0); err != nil { // loads the script
		t.Fatal(err)
	}
	q.Enqueue(bg, job("d", 0))
	h := &trips{}
	q.c.AddHook(h)
	for _, tc := range []struct {
		name string
		busy *busy
		want int64
	}{{"told", &busy{has: map[string]bool{"d": true}}, 1}, {"not told", nil, 2}} {
		h.n.Store(0)
		l, err := q.leaseAmong(bg, "w", caps, 0, tc.busy, nil)
		if err != nil || l == nil || l.Provider != "d" {
			t.Fatalf("%s: %+v %v", tc.name, l, err)
		}
		if n := h.n.Load(); n != tc.want {
			t.Errorf("%s: %d round trips, want %d", tc.name, n, tc.want)
		}
	}
}
