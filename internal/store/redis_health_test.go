package store

import (
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/health"
	"switchboard/internal/store/redistest"
)

// Two registries on two connections to one Redis: an opening, a pause and
// a closing seen by one reach the other; with Redis gone each decides
// alone.
func TestRedisSharedHealth(t *testing.T) {
	srv := redistest.Start(t)
	s1, _ := openRedis(t, srv)
	s2, _ := openRedis(t, srv)
	set := health.Settings{Threshold: 2, Window: time.Minute, Cooldown: 200 * time.Millisecond}
	r1, r2 := health.New(clock.Real{}, set), health.New(clock.Real{}, set)
	r1.SetShared(s1.Health())
	r2.SetShared(s2.Health())
	r2.Available("p")
	r2.Available("q")

	r1.Observe("p", health.Failure)
	r1.Observe("p", health.Failure)
	waitUntil(t, func() bool { return r2.Status("p").CircuitOpen })
	if r2.Available("p") {
		t.Fatal("r2 adopted the opening but still offers p")
	}
	r1.Pause("q", 0, 1, 30*time.Second, health.ReasonQuotaExhausted)
	waitUntil(t, func() bool { return r2.Status("q").PauseReason == health.ReasonQuotaExhausted })
	if until := r2.Status("q").PausedUntil; until.Before(time.Now().Add(25*time.Second)) || until.After(time.Now().Add(31*time.Second)) {
		t.Fatalf("pause until %v", until)
	}
	// After the cooldown r2 probes and succeeds: r1 closes.
	time.Sleep(set.Cooldown)
	if !r2.Begin("p", false) {
		t.Fatal("no probe after the cooldown")
	}
	r2.Observe("p", health.Success)
	waitUntil(t, func() bool { return !r1.Status("p").CircuitOpen })

	srv.Kill()
	start := time.Now()
	r1.Observe("x", health.Failure)
	r1.Observe("x", health.Failure)
	for range 20 {
		r2.Available("x")
		r1.Available("x")
	}
	if r1.Available("x") || !r2.Available("x") || time.Since(start) > 2*time.Second {
		t.Fatalf("without redis: r1 %v r2 %v after %v", r1.Available("x"), r2.Available("x"), time.Since(start))
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
