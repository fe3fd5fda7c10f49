package health

import (
	"sync"
	"time"
)

// Transition kinds: what an operator reads in the log and on the dashboard.
const (
	EventCircuitOpen     = "circuit_open"
	EventCircuitHalfOpen = "circuit_half_open"
	EventCircuitClosed   = "circuit_closed"
	EventPaused          = "paused"
	EventUnpaused        = "unpaused"
)

// Transition is one change of a provider's health.
type Transition struct {
	Time     time.Time
	Provider string
	Kind     string
	// Reason is a pause's reason; Until its end.
	Reason string
	Until  time.Time
	// Fleet marks a transition adopted from another replica.
	Fleet bool
}

// maxTransitions bounds the recent transitions kept for the dashboard.
const maxTransitions = 100

// transitions is a bounded ring of recent transitions plus a hook.
type transitions struct {
	mu     sync.Mutex
	ring   []Transition
	next   int
	notify func(Transition)
}

// OnTransition sets a hook called once per transition (for the log). It
// runs while the provider's state is locked: it must not call back into
// the Registry. Set it before traffic starts.
func (r *Registry) OnTransition(f func(Transition)) {
	r.events.mu.Lock()
	r.events.notify = f
	r.events.mu.Unlock()
}

// Transitions returns the most recent transitions, oldest first.
func (r *Registry) Transitions() []Transition {
	e := &r.events
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Transition, 0, len(e.ring))
	if len(e.ring) == maxTransitions {
		out = append(out, e.ring[e.next:]...)
		return append(out, e.ring[:e.next]...)
	}
	return append(out, e.ring...)
}

// record keeps t and calls the hook. The caller may hold s.mu.
func (r *Registry) record(t Transition) {
	e := &r.events
	e.mu.Lock()
	if len(e.ring) < maxTransitions {
		e.ring = append(e.ring, t)
	} else {
		e.ring[e.next] = t
		e.next = (e.next + 1) % maxTransitions
	}
	f := e.notify
	e.mu.Unlock()
	if f != nil {
		f(t)
	}
}

// endedPause records the end of a pause that passed (noticed lazily, at the
// next look at the provider; dated when it ended). Call with s.mu held.
func (r *Registry) endedPause(name string, s *state, now time.Time) {
	if s.pause.IsZero() || now.Before(s.pause) {
		return
	}
	r.record(Transition{Time: s.pause, Provider: name, Kind: EventUnpaused, Reason: s.reason})
	s.pause, s.reason = time.Time{}, ""
}
