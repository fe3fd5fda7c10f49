// Package clock lets time be injected: production code reads a Clock, tests
// drive a Fake and never sleep.
package clock

import (
	"sync"
	"time"
)

// Clock is the time source of the gateway's timers and windows.
type Clock interface {
	Now() time.Time
	// After fires once d has passed; stop releases it early.
	After(d time.Duration) (c <-chan time.Time, stop func())
	// AfterFunc calls f in its own goroutine once d has passed, unless
	// stop is called first; stop reports whether it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Real is the wall clock.
type Real struct{}

func (Real) Now() time.Time { return time.Now() }

func (Real) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

func (Real) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// Fake is a manually advanced clock for tests.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
}

type waiter struct {
	at time.Time
	c  chan time.Time
	f  func()
}

// NewFake returns a Fake reading t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *Fake) After(d time.Duration) (<-chan time.Time, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &waiter{at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		w.c <- f.now
		return w.c, func() {}
	}
	f.waiters = append(f.waiters, w)
	return w.c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.waiters {
			if x == w {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				return
			}
		}
	}
}

// AfterFunc implements Clock: f runs in its own goroutine when Advance
// passes the deadline.
func (f *Fake) AfterFunc(d time.Duration, fn func()) func() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &waiter{at: f.now.Add(d), f: fn}
	if d <= 0 {
		go fn()
		return func() bool { return false }
	}
	f.waiters = append(f.waiters, w)
	return func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.waiters {
			if x == w {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Advance moves the clock forward and fires every timer that is due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		switch {
		case w.at.After(f.now):
			kept = append(kept, w)
		case w.f != nil:
			go w.f()
		default:
			w.c <- f.now
		}
	}
	f.waiters = kept
}

// Waiters reports how many timers are pending, so a test can wait until the
// code under test is blocked on the clock before advancing it.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}
