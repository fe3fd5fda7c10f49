package queue

import (
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"
)

// A stream's messages sent without waiting reach the origin in order,
// all before the terminal; once the job is canceled nothing more is
// published and every later call says so.
func TestSendIsOrderedAndFenced(t *testing.T) {
	q, _ := open(t, Options{})
	o, err := q.StartOrigin(bg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	start := func() (*Job, *Delivery, *Watch, func()) {
		j := job("a", 0)
		j.Origin = o.ID
		wt, stop := o.Watch(j.ID)
		if _, err := q.Enqueue(bg, j); err != nil {
			t.Fatal(err)
		}
		return j, &Delivery{Lease: mustLease(t, q), q: q, opTimout: 5 * time.Second}, wt, stop
	}
	next := func(wt *Watch) Msg {
		t.Helper()
		select {
		case m := <-wt.C:
			return m
		case <-time.After(5 * time.Second):
			t.Fatal("no message")
		}
		return Msg{}
	}

	_, d, wt, stop := start()
	const n = 300 // several batches, past the in-flight bound
	if err := d.Send(KindHead, 0, []byte("head")); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if err := d.Send(KindChunk, i, []byte("chunk "+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Complete([]byte(`{"kind":"stream","status":200}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if m := next(wt); m.Kind != KindHead {
		t.Fatalf("first message %+v", m)
	}
	for i := 1; i <= n; i++ {
		if m := next(wt); m.Kind != KindChunk || m.Seq != i || string(m.Payload) != "chunk "+strconv.Itoa(i) {
			t.Fatalf("message %d: %s %d %q", i, m.Kind, m.Seq, m.Payload)
		}
	}
	if m := next(wt); m.Kind != KindTerminal {
		t.Fatalf("after the chunks: %+v", m)
	}
	stop()

	j, d, wt, stop := start()
	defer stop()
	if err := d.Send(KindHead, 0, []byte("head")); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Cancel(bg, j.Provider, j.ID, j.OToken); err != nil {
		t.Fatal(err)
	}
	_ = d.Send(KindChunk, 1, []byte("late")) // refused by the fence, now or at the flush
	if err := d.Flush(); err != ErrCanceled {
		t.Fatalf("flush after cancel: %v", err)
	}
	if err := d.Send(KindChunk, 2, []byte("later")); err != ErrCanceled {
		t.Fatalf("send after cancel: %v", err)
	}
	if err := d.Complete([]byte(`{"kind":"stream","status":200}` + "\n")); err != ErrCanceled {
		t.Fatalf("complete after cancel: %v", err)
	}
	// What the origin gets: the head, the cancellation, then this marker,
	// never a chunk.
	q.c.Publish(bg, q.originChannel(o.ID), j.ID+"\n0\nmarker\n0\n")
	for _, want := range []string{KindHead, KindCanceled, "marker"} {
		if m := next(wt); m.Kind != want {
			t.Fatalf("got %s %q, want %s", m.Kind, m.Payload, want)
		}
	}
}
