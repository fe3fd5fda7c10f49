package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/queue"
)

// A worker whose result could not be stored (Redis failing over) tries
// again on the injected clock, backing off from 50 ms, for as long as its
// lease lasts, and stops at once on a fenced refusal: the client gets its
// answer once Redis is back instead of after the lease and a second run.
func TestCompleteRetryPolicy(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	p := &Plane{Q: queue.New(nil, queue.Options{Lease: 3 * time.Second}), Clock: clk}
	retry := p.completeRetry(context.Background())
	for _, err := range []error{queue.ErrLost, queue.ErrCanceled, queue.ErrTooLarge} {
		if retry(0, err) {
			t.Errorf("tried again after %v", err)
		}
	}
	transient := errors.New("CLUSTERDOWN The cluster is down")
	start := clk.Now()
	var waits []time.Duration
	for try := 0; try < 100; try++ {
		t0 := clk.Now()
		res := make(chan bool, 1)
		go func() { res <- retry(try, transient) }()
		bound := time.Now().Add(10 * time.Second) // real time: only a hang fails here
		var again bool
	wait:
		for {
			select {
			case again = <-res:
				break wait
			default:
			}
			if clk.Waiters() > 0 {
				clk.Advance(10 * time.Millisecond)
			}
			if time.Now().After(bound) {
				t.Fatal("retry never returned")
			}
			time.Sleep(time.Millisecond)
		}
		if !again {
			break
		}
		waits = append(waits, clk.Now().Sub(t0))
	}
	if len(waits) < 4 || waits[0] < 50*time.Millisecond || waits[1] < 100*time.Millisecond {
		t.Fatalf("waits %v: want a backoff from 50 ms", waits)
	}
	if total := clk.Now().Sub(start); total > 3*time.Second {
		t.Fatalf("kept trying for %v, past the 3 s lease", total)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p.completeRetry(ctx)(0, transient) {
		t.Error("tried again after the job's context ended")
	}
}
