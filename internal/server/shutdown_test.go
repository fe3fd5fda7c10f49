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

	"switchboard/internal/config"
)

// TestGracefulShutdownDrainsStreams: on shutdown the listener closes, /ready
// flips, and a stream in flight still completes.
func TestGracefulShutdownDrainsStreams(t *testing.T) {
	cfg, err := config.Parse([]byte(`providers:
  slow: {type: mock, mock: {tokens: 10, tokens_per_second: 40}}
models:
  - name: m
    providers: [{provider: slow}]
timeouts: {shutdown: 10}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := New(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	s.Apply(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()

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
