// Package health answers one question for the attempt loop: may this
// provider take a request now? A circuit breaker (5xx, 529, transport
// failures and timeouts) and a quota pause (429, 402, quota-flavoured 403)
// stand behind one Available check. State is keyed by the provider's
// config name, so it survives config reloads. In a fleet, circuit and
// pause transitions are shared with the other replicas through a Shared
// backend (shared.go).
package health

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"switchboard/internal/clock"
)

// Settings are the breaker and pause parameters of one config snapshot.
type Settings struct {
	// Threshold failures within Window open the circuit; 0 disables it.
	Threshold int
	Window    time.Duration
	// Cooldown before one half-open probe is let through.
	Cooldown time.Duration
	// DefaultPause applies when a quota answer states no reset.
	DefaultPause time.Duration
}

// Outcome of one attempt, as the breaker sees it.
type Outcome int

const (
	// Success closes the circuit.
	Success Outcome = iota
	// Failure counts toward opening it (5xx, 529, transport, timeout).
	Failure
	// Neutral neither counts nor heals (429, other 4xx, client gone).
	Neutral
)

// Registry holds every provider's health.
type Registry struct {
	clock    clock.Clock
	settings atomic.Pointer[Settings]
	states   sync.Map // provider name -> *state
	// shared is the fleet-wide backend; nil = this process only.
	shared atomic.Pointer[shared]
	// events keeps recent circuit and pause transitions (events.go).
	events transitions
}

// New returns a registry reading time from c.
func New(c clock.Clock, s Settings) *Registry {
	r := &Registry{clock: c}
	r.settings.Store(&s)
	return r
}

// Configure swaps the settings (on config reload); state is kept.
func (r *Registry) Configure(s Settings) { r.settings.Store(&s) }

// Settings returns the current settings.
func (r *Registry) Settings() Settings { return *r.settings.Load() }

type state struct {
	mu        sync.Mutex
	failures  []time.Time
	open      bool
	openedAt  time.Time
	probing   bool // a half-open probe is in flight
	pause     time.Time
	reason    string
	keyPauses map[int]time.Time
	nextKey   int

	successes, errors int64
	lastSuccess       time.Time

	// seen is the stamp of the latest fleet event applied or published.
	seen int64
}

func (r *Registry) state(name string) *state {
	if s, ok := r.states.Load(name); ok {
		return s.(*state)
	}
	s, _ := r.states.LoadOrStore(name, &state{})
	return s.(*state)
}

// Available reports whether the provider may take a request now: not
// quota-paused, and its circuit closed or ready for a half-open probe.
func (r *Registry) Available(name string) bool { return r.admit(name, false) }

// Begin claims the right to send to an available provider. For an open
// circuit past its cooldown exactly one caller wins the half-open probe.
// forced sends regardless (every provider was unavailable).
func (r *Registry) Begin(name string, forced bool) bool {
	return forced || r.admit(name, true)
}

// admit is Available's decision; with claim, a caller that finds the
// half-open probe free takes it.
func (r *Registry) admit(name string, claim bool) bool {
	r.refresh()
	now := r.clock.Now()
	set := r.settings.Load()
	s := r.state(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	r.endedPause(name, s, now)
	switch {
	case now.Before(s.pause):
		return false
	case !s.open:
		return true
	case s.probing || now.Before(s.openedAt.Add(set.Cooldown)):
		return false
	}
	if claim {
		s.probing = true
		r.record(Transition{Time: now, Provider: name, Kind: EventCircuitHalfOpen})
	}
	return true
}

// Observe records an attempt's outcome. A transition (the circuit opened,
// a probe failed, the circuit closed) is published to the fleet, after the
// lock is released.
func (r *Registry) Observe(name string, o Outcome) {
	if ev := r.observe(name, o); ev != 0 {
		r.publish(name, Event{Kind: ev})
	}
}

func (r *Registry) observe(name string, o Outcome) EventKind {
	now := r.clock.Now()
	set := r.settings.Load()
	s := r.state(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch o {
	case Success:
		s.successes++
		s.lastSuccess = now
		wasOpen := s.open
		s.open, s.probing = false, false
		s.failures = s.failures[:0]
		if wasOpen {
			r.record(Transition{Time: now, Provider: name, Kind: EventCircuitClosed})
			return Closed
		}
	case Failure:
		s.errors++
		if set.Threshold <= 0 {
			return 0
		}
		if s.open {
			if s.probing {
				// The half-open probe failed: a fresh cooldown.
				s.probing = false
				s.openedAt = now
				r.record(Transition{Time: now, Provider: name, Kind: EventCircuitOpen, Reason: "half-open probe failed"})
				return Opened
			}
			return 0
		}
		cut := now.Add(-set.Window)
		kept := s.failures[:0]
		for _, t := range s.failures {
			if t.After(cut) {
				kept = append(kept, t)
			}
		}
		s.failures = append(kept, now)
		if len(s.failures) >= set.Threshold {
			s.open, s.openedAt = true, now
			s.failures = s.failures[:0]
			r.record(Transition{Time: now, Provider: name, Kind: EventCircuitOpen,
				Reason: fmt.Sprintf("%d failures within %s", set.Threshold, set.Window)})
			return Opened
		}
	case Neutral:
		s.errors++
		// A probe that got a neutral answer proved nothing; let another try.
		s.probing = false
	}
	return 0
}

// Pause quota-pauses the provider (or, with keys > 1, only the key at
// index key) until now+d; the provider pauses when all its keys are
// paused. A new pause never shortens an existing one.
func (r *Registry) Pause(name string, key, keys int, d time.Duration, reason string) {
	now := r.clock.Now()
	if until, ok := r.pause(name, key, keys, now.Add(d), reason, now); ok {
		// Only a provider-wide pause is shared: key indexes are per config.
		r.publish(name, Event{Kind: Paused, Pause: until.Sub(now), Reason: reason})
	}
}

// pause applies a pause and reports the provider's new pause end when it
// moved.
func (r *Registry) pause(name string, key, keys int, until time.Time, reason string, now time.Time) (time.Time, bool) {
	s := r.state(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if keys > 1 {
		if s.keyPauses == nil {
			s.keyPauses = make(map[int]time.Time)
		}
		if until.After(s.keyPauses[key]) {
			s.keyPauses[key] = until
		}
		earliest := time.Time{}
		for i := 0; i < keys; i++ {
			t := s.keyPauses[i]
			if !t.After(now) {
				return time.Time{}, false // a key is still usable
			}
			if earliest.IsZero() || t.Before(earliest) {
				earliest = t
			}
		}
		until = earliest
	}
	r.endedPause(name, s, now)
	if until.After(s.pause) {
		if s.pause.IsZero() {
			r.record(Transition{Time: now, Provider: name, Kind: EventPaused, Reason: reason, Until: until})
		}
		s.pause, s.reason = until, reason
		return until, true
	}
	return time.Time{}, false
}

// PickKey returns the next key index to use, skipping paused keys; with
// every key paused it still rotates.
func (r *Registry) PickKey(name string, keys int) int {
	if keys <= 1 {
		return 0
	}
	now := r.clock.Now()
	s := r.state(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < keys; i++ {
		k := (s.nextKey + i) % keys
		if !s.keyPauses[k].After(now) {
			s.nextKey = k + 1
			return k
		}
	}
	k := s.nextKey % keys
	s.nextKey = k + 1
	return k
}

// Status is a snapshot for health endpoints and persistence.
type Status struct {
	CircuitOpen bool
	OpenedAt    time.Time
	PausedUntil time.Time
	PauseReason string
	Successes   int64
	Errors      int64
	LastSuccess time.Time
}

// Status returns the provider's current health.
func (r *Registry) Status(name string) Status {
	r.refresh()
	now := r.clock.Now()
	s := r.state(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	r.endedPause(name, s, now)
	st := Status{CircuitOpen: s.open, OpenedAt: s.openedAt, Successes: s.successes, Errors: s.errors, LastSuccess: s.lastSuccess}
	if now.Before(s.pause) {
		st.PausedUntil, st.PauseReason = s.pause, s.reason
	}
	return st
}

// Restore loads persisted state for a provider (at boot).
func (r *Registry) Restore(name string, st Status) {
	s := r.state(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open, s.openedAt = st.CircuitOpen, st.OpenedAt
	s.pause, s.reason = st.PausedUntil, st.PauseReason
	s.successes, s.errors, s.lastSuccess = st.Successes, st.Errors, st.LastSuccess
}
