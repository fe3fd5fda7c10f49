package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/config"
)

// TestGracefulShutdownDrainsStreams: on shutdown the listener closes, /ready
// flips, and a stream in flight still completes.
func TestGracefulShutdownDrainsStreams(t *testing.T) {
	s, url, cancel, served := serveOnPort(t, `providers:
  slow: {type: mock, mock: {tokens: 10, tokens_per_second: 40}}
models:
  - name: m
    providers: [{provider: slow}]
timeouts: {shutdown: 10}
`, nil)

	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
	if err != nil {
		t.Fatal(err)
	}
	cancel() // SIGTERM
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Fatalf("stream cut by shutdown: %v %q", err, b)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the drain")
	}
	if s.Ready() {
		t.Fatal("still ready after shutdown")
	}
	if _, err := http.Get(url + "/health"); err == nil {
		t.Fatal("still accepting after shutdown")
	}
}

// TestShutdownDelayKeepsServingWhileNotReady: during
// timeouts.shutdown_delay /ready answers 503 and /health/detail says
// draining, yet new requests are still served and the listener is open;
// after the delay the gateway stops accepting and exits.
func TestShutdownDelayKeepsServingWhileNotReady(t *testing.T) {
	clk := clock.NewFake(time.Now())
	_, url, cancel, served := serveOnPort(t, `providers:
  a: {type: mock, mock: {tokens: 3}}
models:
  - name: m
    providers: [{provider: a}]
timeouts: {shutdown: 10, shutdown_delay: 15}
`, clk)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) int {
		resp, err := client.Get(url + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if get("/ready") != 200 {
		t.Fatal("not ready before shutdown")
	}
	cancel()                                              // SIGTERM
	waitFor(t, func() bool { return clk.Waiters() == 1 }) // the delay has begun
	if code := get("/ready"); code != 503 {
		t.Fatalf("/ready during the delay = %d, want 503", code)
	}
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("request during the delay: %v %v", err, resp)
	}
	resp.Body.Close()
	select {
	case <-served:
		t.Fatal("Serve returned before the delay ended")
	default:
	}
	clk.Advance(15 * time.Second)
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the delay")
	}
	if _, err := client.Get(url + "/health"); err == nil {
		t.Fatal("still accepting after the drain")
	}
}

// serveOnPort runs a gateway for yaml on a real listener, as the binary
// does: cancel is SIGTERM, served receives Serve's result.
func serveOnPort(t *testing.T, yaml string, clk clock.Clock) (s *Server, url string, cancel func(), served chan error) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s = New(slog.New(slog.NewTextHandler(io.Discard, nil)), clk, nil)
	s.Apply(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	served = make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	return s, "http://" + ln.Addr().String(), cancel, served
}
