// Package bearer keeps the short-lived access token of a cloud provider
// (a Google OAuth token for Vertex AI, a Microsoft Entra ID token for
// Azure OpenAI): fetched by the vendor's library, shared by every request,
// refreshed in the background before it expires (from the expiry the
// issuer stated), dropped when the cloud answers 401 so the next attempt
// gets a new one, and never waited on longer than the attempt allows.
package bearer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"switchboard/internal/clock"
)

// Token is an access token and the time it stops being valid.
type Token struct {
	Value  string
	Expiry time.Time
}

// Fetch obtains a new token from the issuer, never a cached one.
type Fetch func(ctx context.Context) (Token, error)

// Defaults of a Cache.
const (
	// DefaultEarly is how long before its expiry a token is replaced.
	DefaultEarly = 5 * time.Minute
	// DefaultFetchTimeout bounds one fetch; requests stop waiting sooner
	// (their own bound) but the fetch goes on for the ones after them.
	DefaultFetchTimeout = time.Minute
	// retryGap spaces background refreshes after one failed, so that an
	// issuer that is down is not asked once per request while the
	// current token still serves.
	retryGap = 5 * time.Second
)

// ErrWait is returned when no token came within the caller's bound.
var ErrWait = errors.New("the credential source did not produce a token in time")

// Cache is one provider's token. Its zero value is not usable: use New.
type Cache struct {
	fetch Fetch
	clk   clock.Clock
	// Early and FetchTimeout may be changed before first use.
	Early        time.Duration
	FetchTimeout time.Duration

	cur atomic.Pointer[entry]
	// quiet is when a background refresh may be tried again after a
	// failed one (Unix ns).
	quiet atomic.Int64
	mu    sync.Mutex
	run   *call // the fetch in flight, nil when none
}

// entry is the current token and when to replace it.
type entry struct {
	Token
	refresh time.Time
}

type call struct {
	done chan struct{}
	tok  Token
	err  error
}

// New returns a cache that fetches with f and reads time from clk (nil =
// the real clock).
func New(f Fetch, clk clock.Clock) *Cache {
	if clk == nil {
		clk = clock.Real{}
	}
	return &Cache{fetch: f, clk: clk, Early: DefaultEarly, FetchTimeout: DefaultFetchTimeout}
}

// Get returns a valid token. A token within Early of its expiry is still
// returned while a fresh one is fetched in the background; without a
// valid token Get waits for a fetch, at most wait (and no longer than ctx),
// and then fails with ErrWait. A fetch failure is returned as it is.
func (c *Cache) Get(ctx context.Context, wait time.Duration) (string, error) {
	now := c.clk.Now()
	if t := c.cur.Load(); t != nil && now.Before(t.Expiry) {
		if !now.Before(t.refresh) && now.UnixNano() >= c.quiet.Load() {
			c.start() // in the background; this one is still good
		}
		return t.Value, nil
	}
	cl := c.start()
	var timeout <-chan time.Time
	if wait > 0 {
		tm := time.NewTimer(wait)
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case <-cl.done:
		if cl.err != nil {
			return "", cl.err
		}
		return cl.tok.Value, nil
	case <-ctx.Done():
		return "", ctx.Err()
	case <-timeout:
		return "", ErrWait
	}
}

// refreshAt is when a token got at now should be replaced: Early before
// its expiry, or at half its life for tokens that live shorter than twice
// Early.
func (c *Cache) refreshAt(t Token, now time.Time) time.Time {
	early := c.Early
	if life := t.Expiry.Sub(now); life < 2*early {
		early = life / 2
	}
	return t.Expiry.Add(-early)
}

// Drop forgets value if it is the current token (the cloud refused it):
// the next Get fetches a new one. A newer token is kept.
func (c *Cache) Drop(value string) {
	if t := c.cur.Load(); t != nil && t.Value == value {
		c.cur.CompareAndSwap(t, nil)
	}
}

// start returns the fetch in flight, starting one when there is none.
func (c *Cache) start() *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run != nil {
		return c.run
	}
	cl := &call{done: make(chan struct{})}
	c.run = cl
	go func() {
		// Not the request's context: the fetch serves whoever comes next
		// even when the request that started it has gone.
		ctx, cancel := context.WithTimeout(context.Background(), c.FetchTimeout)
		defer cancel()
		tok, err := c.fetch(ctx)
		if err == nil && tok.Value == "" {
			err = errors.New("the credential source returned an empty token")
		}
		cl.tok, cl.err = tok, err
		if err != nil {
			c.quiet.Store(c.clk.Now().Add(retryGap).UnixNano())
		} else {
			now := c.clk.Now()
			if tok.Expiry.IsZero() {
				// No stated expiry: keep it for the refresh margin only.
				tok.Expiry = now.Add(2 * c.Early)
			}
			c.cur.Store(&entry{Token: tok, refresh: c.refreshAt(tok, now)})
		}
		c.mu.Lock()
		c.run = nil
		c.mu.Unlock()
		close(cl.done)
	}()
	return cl
}
