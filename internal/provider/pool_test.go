package provider

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// upstreamCountingConns is an httptest server that counts the connections
// opened to it.
func upstreamCountingConns(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	var conns atomic.Int64
	up := httptest.NewUnstartedServer(h)
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	return up, &conns
}

func get(t *testing.T, c *http.Client, url string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// TestPoolMaxAge: a pooled connection serves new requests until it is
// MaxAge old; then the next request opens a fresh one. MaxAge 0 keeps it.
func TestPoolMaxAge(t *testing.T) {
	tests := []struct {
		name   string
		maxAge time.Duration
		conns  []int64 // connections opened after each request, 10 s of clock apart
	}{
		{"300 s max age", 300 * time.Second, []int64{1, 1, 1, 2, 2}},
		{"off", 0, []int64{1, 1, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, conns := upstreamCountingConns(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
			var mu sync.Mutex
			now := time.Unix(1_000_000, 0)
			pool := &Pool{now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
			o := ClientOptions{Open: time.Second, Read: time.Second, Write: time.Second, MaxAge: tt.maxAge}
			pool.gen.Store(&poolGen{t: newTransport(o), o: o, born: now})
			c := &http.Client{Transport: pool}
			steps := []time.Duration{0, 100 * time.Second, 299 * time.Second, 300 * time.Second, 599 * time.Second}
			for i, at := range steps {
				mu.Lock()
				now = time.Unix(1_000_000, 0).Add(at)
				mu.Unlock()
				get(t, c, up.URL)
				if got := conns.Load(); got != tt.conns[i] {
					t.Fatalf("after the request at %v: %d connections, want %d", at, got, tt.conns[i])
				}
			}
		})
	}
}

// TestPoolConfigureAppliesTimeouts: a reload's new read bound applies to
// the next request (the pool is not built once for good), and unchanged
// options keep the warm connection.
func TestPoolConfigureAppliesTimeouts(t *testing.T) {
	up, conns := upstreamCountingConns(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(150 * time.Millisecond) // headers arrive after 150 ms
		}
		io.WriteString(w, "ok")
	})
	c := NewHTTPClient(ClientOptions{Open: time.Second, Read: 2 * time.Second, Write: time.Second, MaxAge: 300 * time.Second})
	pool := c.Transport.(*Pool)
	get(t, c, up.URL+"/slow") // within the 2 s bound
	pool.Configure(pool.Options())
	get(t, c, up.URL)
	if conns.Load() != 1 {
		t.Fatalf("unchanged options reopened the connection: %d", conns.Load())
	}
	o := pool.Options()
	o.Read = 50 * time.Millisecond
	pool.Configure(o)
	if _, err := c.Get(up.URL + "/slow"); err == nil {
		t.Fatal("the reloaded 50 ms read bound did not apply")
	}
	if conns.Load() != 2 {
		t.Fatalf("new options should take a fresh connection: %d", conns.Load())
	}
}
