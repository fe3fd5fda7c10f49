package queue

import (
	"io"
	"log/slog"
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
		q.OriginState(bg, j.ID, j.OToken, true)
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
