package bearer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/clock"
)

// issuer hands out tok-1, tok-2, ... each valid for life from the fake
// clock's now, counting fetches; a fetch blocks while gate is held.
type issuer struct {
	clk   *clock.Fake
	life  time.Duration
	n     atomic.Int32
	gate  chan struct{} // nil: never blocks
	fails atomic.Bool
}

func (i *issuer) fetch(ctx context.Context) (Token, error) {
	if i.gate != nil {
		select {
		case <-i.gate:
		case <-ctx.Done():
			return Token{}, ctx.Err()
		}
	}
	if i.fails.Load() {
		i.n.Add(1)
		return Token{}, errors.New("invalid_grant")
	}
	n := i.n.Add(1)
	return Token{Value: fmt.Sprintf("tok-%d", n), Expiry: i.clk.Now().Add(i.life)}, nil
}

// settle waits for a background fetch to land (it runs on its own goroutine).
func settle(t *testing.T, c *Cache) {
	t.Helper()
	for range 1000 {
		c.mu.Lock()
		idle := c.run == nil
		c.mu.Unlock()
		if idle {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("fetch did not finish")
}

func TestCacheRefreshesBeforeExpiry(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	iss := &issuer{clk: clk, life: time.Hour}
	c := New(iss.fetch, clk)
	ctx := context.Background()
	steps := []struct {
		advance time.Duration
		want    string
		fetches int32
	}{
		{0, "tok-1", 1},                // first use fetches
		{30 * time.Minute, "tok-1", 1}, // cached
		{24 * time.Minute, "tok-1", 1}, // 6 min left: still outside the 5 min margin
		{2 * time.Minute, "tok-1", 2},  // 4 min left: served, replaced in the background
		{0, "tok-2", 2},                // the replacement, before tok-1 expired
		{2 * time.Hour, "tok-3", 3},    // long idle: tok-2 expired, a blocking fetch
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		got, err := c.Get(ctx, time.Second)
		settle(t, c)
		if err != nil || got != s.want || iss.n.Load() != s.fetches {
			t.Fatalf("step %d: got %q %v after %d fetches, want %q after %d", i, got, err, iss.n.Load(), s.want, s.fetches)
		}
	}
}

// A token living shorter than twice the margin is replaced at half its life.
func TestCacheShortLivedToken(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	iss := &issuer{clk: clk, life: 4 * time.Minute}
	c := New(iss.fetch, clk)
	if v, _ := c.Get(context.Background(), time.Second); v != "tok-1" {
		t.Fatal(v)
	}
	clk.Advance(119 * time.Second)
	_, _ = c.Get(context.Background(), time.Second)
	settle(t, c)
	if iss.n.Load() != 1 {
		t.Fatalf("refreshed before half its life: %d fetches", iss.n.Load())
	}
	clk.Advance(2 * time.Second)
	_, _ = c.Get(context.Background(), time.Second)
	settle(t, c)
	if v, _ := c.Get(context.Background(), time.Second); v != "tok-2" || iss.n.Load() != 2 {
		t.Fatalf("got %q after %d fetches", v, iss.n.Load())
	}
}

func TestCacheDropFetchesAgain(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	iss := &issuer{clk: clk, life: time.Hour}
	c := New(iss.fetch, clk)
	v, _ := c.Get(context.Background(), time.Second)
	c.Drop("not-the-current-one")
	if w, _ := c.Get(context.Background(), time.Second); w != v {
		t.Fatalf("dropping another value replaced the token: %q", w)
	}
	c.Drop(v)
	if w, _ := c.Get(context.Background(), time.Second); w != "tok-2" {
		t.Fatalf("after a drop: %q", w)
	}
}

// Concurrent callers share one fetch; a fetch that does not finish in the
// callers' bound fails them with ErrWait, and its token still serves the
// callers after it.
func TestCacheBoundedWaitSharedFetch(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	iss := &issuer{clk: clk, life: time.Hour, gate: make(chan struct{})}
	c := New(iss.fetch, clk)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Get(context.Background(), 30*time.Millisecond)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrWait) {
			t.Fatalf("caller %d: %v, want ErrWait", i, err)
		}
	}
	close(iss.gate)
	settle(t, c)
	if v, err := c.Get(context.Background(), time.Second); v != "tok-1" || err != nil || iss.n.Load() != 1 {
		t.Fatalf("got %q %v after %d fetches", v, err, iss.n.Load())
	}
}

// A failed fetch is the caller's error; a failed background refresh leaves
// the current token serving and is not retried on every request.
func TestCacheFetchFailures(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	iss := &issuer{clk: clk, life: time.Hour}
	c := New(iss.fetch, clk)
	iss.fails.Store(true)
	if _, err := c.Get(context.Background(), time.Second); err == nil || err.Error() != "invalid_grant" {
		t.Fatalf("err %v", err)
	}
	iss.fails.Store(false)
	v, _ := c.Get(context.Background(), time.Second)
	iss.fails.Store(true)
	clk.Advance(56 * time.Minute) // in the refresh margin
	for range 5 {
		if w, err := c.Get(context.Background(), time.Second); w != v || err != nil {
			t.Fatalf("got %q %v", w, err)
		}
		settle(t, c)
	}
	if n := iss.n.Load(); n != 3 {
		t.Fatalf("%d fetches, want 3 (one failed refresh, then quiet)", n)
	}
	clk.Advance(retryGap)
	iss.fails.Store(false)
	_, _ = c.Get(context.Background(), time.Second)
	settle(t, c)
	if w, _ := c.Get(context.Background(), time.Second); w == v {
		t.Fatal("not refreshed after the quiet gap")
	}
}
