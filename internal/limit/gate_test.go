package limit

import (
	"context"
	"errors"
	"testing"
	"time"

	"switchboard/internal/clock"
)

// waitFor polls (without sleeping on the fake clock) until cond holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

type acq struct {
	release func()
	waited  time.Duration
	err     error
}

func acquire(g *Gate, ctx context.Context, timeout time.Duration) chan acq {
	c := make(chan acq, 1)
	go func() {
		r, w, err := g.Acquire(ctx, timeout)
		c <- acq{r, w, err}
	}()
	return c
}

func TestGateSaturationTimesOut(t *testing.T) {
	clk := clock.NewFake(t0)
	g := NewGate(clk, 2)
	r1, _, _ := g.Acquire(context.Background(), time.Second)
	r2, _, _ := g.Acquire(context.Background(), time.Second)
	if r1 == nil || r2 == nil {
		t.Fatal("free slots refused")
	}
	if _, _, err := g.Acquire(context.Background(), 0); !errors.Is(err, ErrSaturated) {
		t.Errorf("zero timeout: err = %v", err)
	}
	c := acquire(g, context.Background(), 5*time.Second)
	waitFor(t, func() bool { _, w := g.Load(); return w == 1 && clk.Waiters() == 1 })
	clk.Advance(5 * time.Second)
	got := <-c
	if !errors.Is(got.err, ErrSaturated) || got.waited != 5*time.Second {
		t.Errorf("got %+v, want saturated after 5s", got)
	}
	if _, w := g.Load(); w != 0 {
		t.Errorf("waiter left in queue")
	}
	r1()
	r1() // idempotent
	if in, _ := g.Load(); in != 1 {
		t.Errorf("in use = %d after one release (twice)", in)
	}
	r2()
}

func TestGateFIFOHandOff(t *testing.T) {
	clk := clock.NewFake(t0)
	g := NewGate(clk, 1)
	r, _, _ := g.Acquire(context.Background(), time.Second)
	a := acquire(g, context.Background(), time.Minute)
	waitFor(t, func() bool { _, w := g.Load(); return w == 1 })
	b := acquire(g, context.Background(), time.Minute)
	waitFor(t, func() bool { _, w := g.Load(); return w == 2 })
	clk.Advance(2 * time.Second)
	r()
	ga := <-a
	if ga.err != nil || ga.waited != 2*time.Second {
		t.Fatalf("first waiter: %+v", ga)
	}
	select {
	case <-b:
		t.Fatal("second waiter served while the slot is held")
	default:
	}
	ga.release()
	if gb := <-b; gb.err != nil {
		t.Fatalf("second waiter: %+v", gb)
	} else {
		gb.release()
	}
	if in, w := g.Load(); in != 0 || w != 0 {
		t.Errorf("load = %d, %d", in, w)
	}
}

func TestGateCapacityAndCancel(t *testing.T) {
	clk := clock.NewFake(t0)
	g := NewGate(clk, 1)
	r, _, _ := g.Acquire(context.Background(), time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	c := acquire(g, ctx, time.Minute)
	d := acquire(g, context.Background(), time.Minute)
	waitFor(t, func() bool { _, w := g.Load(); return w == 2 })
	cancel()
	if got := <-c; !errors.Is(got.err, context.Canceled) {
		t.Errorf("cancelled waiter: %+v", got)
	}
	g.SetCapacity(2) // admits the remaining waiter at once
	got := <-d
	if got.err != nil {
		t.Fatalf("after raising capacity: %+v", got)
	}
	g.SetCapacity(1) // lowering lets holders finish
	if in, _ := g.Load(); in != 2 {
		t.Errorf("in use = %d", in)
	}
	r()
	if _, _, err := g.Acquire(context.Background(), 0); !errors.Is(err, ErrSaturated) {
		t.Errorf("still over the lowered capacity, yet admitted")
	}
	got.release()
	if rel, _, err := g.Acquire(context.Background(), 0); err != nil {
		t.Errorf("free again: %v", err)
	} else {
		rel()
	}
}
