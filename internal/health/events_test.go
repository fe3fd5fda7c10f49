package health

import (
	"fmt"
	"testing"
	"time"

	"switchboard/internal/clock"
)

// TestTransitions: each change of a provider's health is recorded once, in
// order, with its reason, and handed to the hook; a pause's end is dated
// when it ended even though it is noticed later.
func TestTransitions(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := clock.NewFake(start)
	r := New(clk, Settings{Threshold: 2, Window: 10 * time.Second, Cooldown: 30 * time.Second})
	var hooked []string
	r.OnTransition(func(tr Transition) { hooked = append(hooked, tr.Provider+" "+tr.Kind) })

	r.Observe("p", Failure)
	r.Observe("p", Failure) // opens
	r.Observe("p", Failure) // already open: no new transition
	clk.Advance(30 * time.Second)
	if !r.Begin("p", false) { // half-open probe
		t.Fatal("no probe after the cooldown")
	}
	r.Observe("p", Success) // closes

	r.Pause("q", 0, 1, 5*time.Second, "quota")
	r.Pause("q", 0, 1, 8*time.Second, "quota") // extends the pause: not a new one
	clk.Advance(20 * time.Second)
	if st := r.Status("q"); !st.PausedUntil.IsZero() {
		t.Fatalf("still paused: %+v", st)
	}

	want := []Transition{
		{Time: start, Provider: "p", Kind: EventCircuitOpen, Reason: "2 failures within 10s"},
		{Time: start.Add(30 * time.Second), Provider: "p", Kind: EventCircuitHalfOpen},
		{Time: start.Add(30 * time.Second), Provider: "p", Kind: EventCircuitClosed},
		{Time: start.Add(30 * time.Second), Provider: "q", Kind: EventPaused, Reason: "quota", Until: start.Add(35 * time.Second)},
		{Time: start.Add(38 * time.Second), Provider: "q", Kind: EventUnpaused, Reason: "quota"},
	}
	got := r.Transitions()
	if len(got) != len(want) {
		t.Fatalf("got %d transitions, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if g, w := got[i], want[i]; !g.Time.Equal(w.Time) || g.Provider != w.Provider || g.Kind != w.Kind ||
			g.Reason != w.Reason || !g.Until.Equal(w.Until) || g.Fleet {
			t.Errorf("transition %d = %+v, want %+v", i, g, w)
		}
	}
	if len(hooked) != len(want) {
		t.Fatalf("hook saw %v, want one call per transition", hooked)
	}
}

// TestTransitionsRing: only the most recent maxTransitions are kept,
// oldest first.
func TestTransitionsRing(t *testing.T) {
	r := New(clock.NewFake(time.Unix(0, 0)), Settings{})
	extra := 7
	for i := range maxTransitions + extra {
		r.record(Transition{Provider: fmt.Sprint(i), Kind: EventPaused})
	}
	got := r.Transitions()
	if len(got) != maxTransitions {
		t.Fatalf("kept %d, want %d", len(got), maxTransitions)
	}
	for i, tr := range got {
		if want := fmt.Sprint(i + extra); tr.Provider != want {
			t.Fatalf("transition %d is %s, want %s", i, tr.Provider, want)
		}
	}
}
