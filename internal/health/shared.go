package health

import (
	"context"
	"sync/atomic"
	"time"
)

// Shared is a fleet-wide record of provider health, so that a circuit one
// replica opened is open on every replica (Redis in a fleet; see
// store.Redis.Health). Implementations must bound every call and may fail:
// the registry then goes on with what this process saw (health fails
// open).
//
// Only transitions travel: a circuit opening (the threshold reached, or a
// half-open probe failing), closing (a probe succeeding), and provider-wide
// quota pauses. Failure counts stay per process, so each replica opens on
// its own threshold and adopts the others' openings. The half-open probe
// after a cooldown is per replica too: at most one probe per replica.
type Shared interface {
	// Publish records one event and returns its stamp, which orders it
	// among every replica's events.
	Publish(ctx context.Context, name string, e Event) (stamp int64, err error)
	// Fetch returns the fleet's record of each named provider that has one.
	Fetch(ctx context.Context, names []string) (map[string]Record, error)
}

// EventKind is a shared health transition.
type EventKind int

const (
	Opened EventKind = iota + 1
	Closed
	Paused
)

// Event is one transition to publish.
type Event struct {
	Kind EventKind
	// Pause is how long from now a Paused provider stays paused; Reason its
	// metric label.
	Pause  time.Duration
	Reason string
	// TTL is how long the record must be kept at least.
	TTL time.Duration
}

// Record is the fleet's view of one provider. Ages and the pause's rest
// are durations measured on the backend's clock, so replicas never compare
// their own clocks with each other.
type Record struct {
	// Open and Close are the stamps of the latest opening and closing (0:
	// none); the later one is the fleet's current state.
	Open, Close       int64
	OpenAge, CloseAge time.Duration
	// PauseLeft > 0: paused that much longer, for Reason.
	PauseLeft time.Duration
	Reason    string
}

// SharedRefresh is the most a replica's view of the fleet lags behind:
// Available, Begin and Status use the cached view and start one
// background fetch when it is older than this, so the request path never
// waits on the backend. Publishing happens on transitions only (a few per
// cooldown), synchronously and bounded by the backend's timeout.
const SharedRefresh = 100 * time.Millisecond

// sharedTimeout bounds one call; backends bound their commands more
// tightly (redis.command_timeout).
const sharedTimeout = 2 * time.Second

type shared struct {
	b    Shared
	last atomic.Int64 // registry-clock ns of the last fetch's start
	busy atomic.Bool
}

// SetShared connects the registry to a fleet-wide backend (nil: this
// process only). Safe to call at any time.
func (r *Registry) SetShared(b Shared) {
	if b == nil {
		r.shared.Store(nil)
		return
	}
	r.shared.Store(&shared{b: b})
}

// refresh starts a background fetch of every known provider's record when
// the cached view is stale and none is running.
func (r *Registry) refresh() {
	sh := r.shared.Load()
	if sh == nil {
		return
	}
	now := r.clock.Now().UnixNano()
	if now-sh.last.Load() < int64(SharedRefresh) || !sh.busy.CompareAndSwap(false, true) {
		return
	}
	sh.last.Store(now)
	go func() {
		defer sh.busy.Store(false)
		var names []string
		r.states.Range(func(k, _ any) bool {
			names = append(names, k.(string))
			return true
		})
		if len(names) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		recs, err := sh.b.Fetch(ctx, names)
		if err != nil {
			return // fail open: this process's own view decides
		}
		for name, rec := range recs {
			r.adopt(name, rec)
		}
	}()
}

// adopt applies the fleet's record of name. An opening is adopted unless
// this replica saw a success after it; a closing closes a circuit opened
// before it; a pause only ever lengthens. Each event applies once (by
// stamp), so a half-open probe is not reset by seeing the same opening
// again.
func (r *Registry) adopt(name string, rec Record) {
	now := r.clock.Now()
	s := r.state(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case rec.Open > rec.Close && rec.Open > s.seen:
		s.seen = rec.Open
		at := now.Add(-rec.OpenAge)
		if !s.lastSuccess.After(at) && (!s.open || at.After(s.openedAt)) {
			if !s.open {
				r.record(Transition{Time: at, Provider: name, Kind: EventCircuitOpen, Reason: "another replica opened it", Fleet: true})
			}
			s.open, s.openedAt, s.probing = true, at, false
			s.failures = s.failures[:0]
		}
	case rec.Close > rec.Open && rec.Close > s.seen:
		s.seen = rec.Close
		if at := now.Add(-rec.CloseAge); s.open && at.After(s.openedAt) {
			s.open, s.probing = false, false
			s.failures = s.failures[:0]
			r.record(Transition{Time: at, Provider: name, Kind: EventCircuitClosed, Reason: "another replica closed it", Fleet: true})
		}
	}
	if rec.PauseLeft > 0 {
		r.endedPause(name, s, now)
		if until := now.Add(rec.PauseLeft); until.After(s.pause) {
			if s.pause.IsZero() {
				r.record(Transition{Time: now, Provider: name, Kind: EventPaused, Reason: rec.Reason, Until: until, Fleet: true})
			}
			s.pause, s.reason = until, rec.Reason
		}
	}
}

// publish sends a transition; its stamp is marked seen so this replica
// does not adopt its own event again.
func (r *Registry) publish(name string, e Event) {
	sh := r.shared.Load()
	if sh == nil {
		return
	}
	set := r.settings.Load()
	e.TTL = max(2*set.Cooldown+set.Window, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	stamp, err := sh.b.Publish(ctx, name, e)
	cancel()
	if err != nil || e.Kind == Paused {
		return
	}
	s := r.state(name)
	s.mu.Lock()
	s.seen = max(s.seen, stamp)
	s.mu.Unlock()
}
