package queue

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// BenchmarkJobRoundTrip is one unary job's queue path, serially: enqueue,
// lease, complete, the origin's notice (terminal inline), ack.
func BenchmarkJobRoundTrip(b *testing.B) {
	q, _ := open(b, Options{})
	o, err := q.StartOrigin(bg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	caps := []Cap{{Provider: "a"}}
	var enq, lease, done, notice, ping time.Duration
	b.ResetTimer()
	for range b.N {
		j := job("a", 0)
		j.Origin = o.ID
		w, stop := o.Watch(j.ID)
		t0 := time.Now()
		if _, err := q.Enqueue(bg, j); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		l, err := q.Lease(bg, "w", caps, 0)
		if err != nil || l == nil {
			b.Fatal(l, err)
		}
		t2 := time.Now()
		if err := q.Complete(bg, l, []byte(`{"kind":"unary","status":200}`+"\n{}")); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		m := <-w.C
		t4 := time.Now()
		q.c.Ping(bg) // the bare round trip, for reference
		ping += time.Since(t4)
		w.Took(m)
		q.OriginState(bg, j.Provider, j.ID, j.OToken, true)
		stop()
		enq += t1.Sub(t0)
		lease += t2.Sub(t1)
		done += t3.Sub(t2)
		notice += t4.Sub(t3)
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64((enq / n).Microseconds()), "enqueue-µs")
	b.ReportMetric(float64((lease / n).Microseconds()), "lease-µs")
	b.ReportMetric(float64((done / n).Microseconds()), "complete-µs")
	b.ReportMetric(float64((notice / n).Microseconds()), "notice-µs")
	b.ReportMetric(float64((ping / n).Microseconds()), "ping-µs")
}

// BenchmarkWorkerHop is one unary job from enqueue to the origin's notice
// through a worker running in the same process (role all): the enqueue,
// which hands the job to the idle worker standing by (handed/job says how
// many were), the delivery's pub/sub message, the worker's completion and
// the origin's notice: what the queue adds to a request's path at the
// least, as p50-µs. providers=4 is a worker configured with four
// providers of which one (the last in its rotation) has work: each
// provider's queue is its own slot, and the worker stands by in every one.
func BenchmarkWorkerHop(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("providers=%d", n), func(b *testing.B) {
			caps := make([]Cap, n)
			for i := range caps {
				caps[i] = Cap{Provider: string(rune('a' + i))}
			}
			workerHop(b, caps, caps[n-1].Provider)
		})
	}
}

func workerHop(b *testing.B, caps []Cap, prov string) {
	q, _ := open(b, Options{})
	o, err := q.StartOrigin(bg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	ctx, cancel := context.WithCancel(bg)
	w := &Worker{Q: q, Caps: func() []Cap { return caps }, Concurrency: 4,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Run: func(_ context.Context, d *Delivery) {
			if err := d.Complete([]byte(`{"kind":"unary","status":200}` + "\n{}")); err != nil {
				b.Error(err)
			}
		}}
	stopped := make(chan struct{})
	go func() { w.Start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	var took []time.Duration
	// The worker subscribes before it waits; the first jobs may wait for
	// that, so they are left out.
	const warm = 20
	for i := range b.N + warm {
		j := job(prov, 0)
		j.Origin = o.ID
		wt, stop := o.Watch(j.ID)
		t0 := time.Now()
		if _, err := q.Enqueue(bg, j); err != nil {
			b.Fatal(err)
		}
		m := <-wt.C
		if i >= warm {
			took = append(took, time.Since(t0))
		}
		wt.Took(m)
		q.OriginState(bg, j.Provider, j.ID, j.OToken, true)
		stop()
		// Let the worker's stale pub/sub wake and its empty lease pass,
		// so that the next job finds it waiting.
		time.Sleep(time.Millisecond)
		if i == warm-1 {
			b.ResetTimer()
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(w.handoffs.Load())/float64(b.N+warm), "handed/job")
}
