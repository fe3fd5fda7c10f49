package provider

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is the shared upstream RoundTripper: one http.Transport at a time,
// replaced by a fresh one (a new generation) when its options change on a
// config reload, and when it is older than MaxAge, so that DNS and
// load-balancer changes reach a long-running gateway (LLM Proxy's pool had a
// 300 s max age). Requests in flight finish on the generation they started
// on; a retired generation's idle connections are closed at once, and those
// freed later by its last requests close after the transport's idle
// timeout, so no connection serves a new request after it has been retired.
// A request pays one atomic load and a clock read; only a rotation locks.
type Pool struct {
	gen atomic.Pointer[poolGen]
	mu  sync.Mutex
	// now is the clock (tests inject one); nil is time.Now.
	now func() time.Time
}

type poolGen struct {
	t    *http.Transport
	o    ClientOptions
	born time.Time
}

// NewPool returns a pool with options o.
func NewPool(o ClientOptions) *Pool {
	p := &Pool{}
	p.gen.Store(&poolGen{t: newTransport(o), o: o, born: p.clock()})
	return p
}

func (p *Pool) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// RoundTrip sends r on the current generation.
func (p *Pool) RoundTrip(r *http.Request) (*http.Response, error) {
	g := p.gen.Load()
	if g.o.MaxAge > 0 && p.clock().Sub(g.born) >= g.o.MaxAge {
		g = p.rotate(g, g.o)
	}
	return g.t.RoundTrip(r)
}

// Configure applies o to requests from now on; unchanged options keep the
// current connections.
func (p *Pool) Configure(o ClientOptions) {
	if g := p.gen.Load(); g.o != o {
		p.rotate(g, o)
	}
}

// Options are the current generation's options.
func (p *Pool) Options() ClientOptions { return p.gen.Load().o }

// rotate replaces generation old (unless another caller already did) with
// a fresh transport using o, and returns the current generation.
func (p *Pool) rotate(old *poolGen, o ClientOptions) *poolGen {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur := p.gen.Load(); cur != old {
		return cur
	}
	next := &poolGen{t: newTransport(o), o: o, born: p.clock()}
	p.gen.Store(next)
	old.t.CloseIdleConnections()
	return next
}

// CloseIdleConnections closes the current generation's idle connections
// (http.Client.CloseIdleConnections calls it).
func (p *Pool) CloseIdleConnections() { p.gen.Load().t.CloseIdleConnections() }
