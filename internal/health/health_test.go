package health

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/clock"
)

func TestBreaker(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	r := New(clk, Settings{Threshold: 3, Window: 10 * time.Second, Cooldown: 30 * time.Second})
	// Failures spread beyond the window do not open it.
	r.Observe("p", Failure)
	r.Observe("p", Failure)
	clk.Advance(11 * time.Second)
	r.Observe("p", Failure)
	if !r.Available("p") {
		t.Fatal("opened on failures outside the window")
	}
	// Neutral outcomes (429, 4xx, client gone) do not count.
	r.Observe("p", Neutral)
	r.Observe("p", Neutral)
	if !r.Available("p") {
		t.Fatal("neutral outcomes opened the circuit")
	}
	r.Observe("p", Failure)
	r.Observe("p", Failure)
	if r.Available("p") || !r.Status("p").CircuitOpen {
		t.Fatal("3 failures in the window did not open it")
	}
	clk.Advance(30 * time.Second)
	// Exactly one concurrent caller gets the half-open probe.
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.Begin("p", false) {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d callers got the probe", wins.Load())
	}
	r.Observe("p", Failure) // probe failed: fresh cooldown
	if r.Available("p") {
		t.Fatal("failed probe did not re-open")
	}
	clk.Advance(30 * time.Second)
	if !r.Begin("p", false) {
		t.Fatal("no probe after the second cooldown")
	}
	r.Observe("p", Success)
	if !r.Available("p") || r.Status("p").CircuitOpen {
		t.Fatal("successful probe did not close the circuit")
	}
}

func TestBreakerDisabled(t *testing.T) {
	r := New(clock.NewFake(time.Unix(0, 0)), Settings{Threshold: 0, Window: time.Second, Cooldown: time.Second})
	for i := 0; i < 100; i++ {
		r.Observe("p", Failure)
	}
	if !r.Available("p") {
		t.Fatal("threshold 0 must disable the breaker")
	}
}

func TestKeyPauses(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	r := New(clk, Settings{Threshold: 3, Window: time.Minute, Cooldown: time.Minute})
	r.Pause("p", 0, 2, time.Minute, ReasonRateLimited)
	if !r.Available("p") {
		t.Fatal("one paused key of two paused the provider")
	}
	for i := 0; i < 4; i++ {
		if k := r.PickKey("p", 2); k != 1 {
			t.Fatalf("picked paused key %d", k)
		}
	}
	r.Pause("p", 1, 2, 2*time.Minute, ReasonRateLimited)
	if r.Available("p") {
		t.Fatal("all keys paused but provider available")
	}
	// The provider pause lasts until the first key frees up.
	clk.Advance(61 * time.Second)
	if !r.Available("p") {
		t.Fatal("provider still paused after key 0's reset")
	}
}
