package limit

import (
	"context"
	"errors"
	"sync"
	"time"

	"switchboard/internal/clock"
)

// ErrSaturated is returned by Gate.Acquire when no slot freed up within the
// queue timeout.
var ErrSaturated = errors.New("concurrency limit reached")

// Gate is a counting semaphore with a FIFO queue whose wait is bounded.
// Its capacity may change at any time (config reload): raising it admits
// waiters at once, lowering it lets running holders finish.
type Gate struct {
	clk clock.Clock

	mu      sync.Mutex
	cap     int
	inUse   int
	waiters []*gateWaiter
}

type gateWaiter struct {
	ready   chan struct{}
	granted bool
}

// NewGate returns a gate of capacity n (n >= 1) timed by clk.
func NewGate(clk clock.Clock, n int) *Gate {
	return &Gate{clk: clk, cap: max(n, 1)}
}

// SetCapacity changes the number of slots.
func (g *Gate) SetCapacity(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cap = max(n, 1)
	g.grantLocked()
}

// Capacity returns the number of slots.
func (g *Gate) Capacity() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cap
}

// Load reports slots in use and callers waiting.
func (g *Gate) Load() (inUse, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inUse, len(g.waiters)
}

func (g *Gate) grantLocked() {
	for len(g.waiters) > 0 && g.inUse < g.cap {
		w := g.waiters[0]
		g.waiters = g.waiters[1:]
		w.granted = true
		g.inUse++
		close(w.ready)
	}
}

// Acquire takes a slot, waiting at most timeout (0 = not at all). It
// returns the release function (idempotent) and how long it waited; err
// is ErrSaturated after the timeout or ctx.Err() when ctx ended first.
func (g *Gate) Acquire(ctx context.Context, timeout time.Duration) (release func(), waited time.Duration, err error) {
	g.mu.Lock()
	if g.inUse < g.cap && len(g.waiters) == 0 {
		g.inUse++
		g.mu.Unlock()
		return g.releaser(), 0, nil
	}
	if timeout <= 0 {
		g.mu.Unlock()
		return nil, 0, ErrSaturated
	}
	w := &gateWaiter{ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()

	start := g.clk.Now()
	timer, stop := g.clk.After(timeout)
	defer stop()
	select {
	case <-w.ready:
		return g.releaser(), g.clk.Now().Sub(start), nil
	case <-timer:
		err = ErrSaturated
	case <-ctx.Done():
		err = ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.granted {
		if err == ErrSaturated {
			// Granted as the wait ran out: the slot is ours.
			return g.releaser(), g.clk.Now().Sub(start), nil
		}
		// The caller left: hand the slot on.
		g.inUse--
		g.grantLocked()
		return nil, g.clk.Now().Sub(start), err
	}
	for i, x := range g.waiters {
		if x == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			break
		}
	}
	return nil, g.clk.Now().Sub(start), err
}

func (g *Gate) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.inUse--
			g.grantLocked()
		})
	}
}
