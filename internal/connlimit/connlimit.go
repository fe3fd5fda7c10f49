// Package connlimit caps the client connections a listener keeps open, so
// that a flood of idle or slow connections cannot take every file
// descriptor. Beyond the cap a few spare connections are still accepted,
// each for a short, fixed lifetime, so that health checks keep answering;
// beyond those, new connections are closed as soon as they are accepted.
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"switchboard/internal/capacity"
)

// Listener wraps a net.Listener with the cap.
type Listener struct {
	net.Listener
	max   atomic.Int64
	spare int64
	life  time.Duration
	open  atomic.Int64 // connections within the cap
	extra atomic.Int64 // spare connections
	// refused counts connections closed at once (over cap and spares).
	refused atomic.Int64
}

// New caps ln at max connections, with spare short-lived connections of at
// most life each beyond it.
func New(ln net.Listener, max, spare int, life time.Duration) *Listener {
	l := &Listener{Listener: ln, spare: int64(spare), life: life}
	l.SetMax(max)
	return l
}

// SetMax changes the cap (a config reload); connections already open stay.
func (l *Listener) SetMax(max int) { l.max.Store(int64(max)) }

// Open returns the connections open now: within the cap, and spare.
func (l *Listener) Open() (normal, spare int64) { return l.open.Load(), l.extra.Load() }

// Refused returns how many connections were closed at once.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// Accept returns the next connection within the cap or a spare one.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max.Load() {
			return &conn{Conn: c, count: &l.open}, nil
		}
		l.open.Add(-1)
		if l.extra.Add(1) <= l.spare {
			until := time.Now().Add(l.life)
			_ = c.SetDeadline(until)
			return &conn{Conn: c, count: &l.extra, until: until}, nil
		}
		l.extra.Add(-1)
		l.refused.Add(1)
		// Closed, not left in the backlog: a client learns at once, and
		// the descriptor is free again.
		_ = c.Close()
	}
}

// Spare reports whether c was accepted beyond the cap.
func Spare(c net.Conn) bool {
	cc, ok := c.(*conn)
	return ok && !cc.until.IsZero()
}

// conn counts itself out once when closed. A spare connection's deadlines
// never pass its end of life, whatever the HTTP server sets.
type conn struct {
	net.Conn
	count *atomic.Int64
	until time.Time // zero within the cap
	once  sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.count.Add(-1) })
	return err
}

// CloseWrite half-closes a TCP connection: net/http does it before closing
// a connection it refuses, so that the client reads the refusal rather than
// a reset. (An embedded net.Conn would hide the method.)
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *conn) clamp(t time.Time) time.Time {
	if !c.until.IsZero() && (t.IsZero() || t.After(c.until)) {
		return c.until
	}
	return t
}

func (c *conn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *conn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.clamp(t)) }
func (c *conn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.clamp(t)) }

// DefaultMax is the cap when limits.max_connections is omitted, sized
// from the descriptor limit (capacity.Connections).
func DefaultMax() int { return capacity.Connections() }
