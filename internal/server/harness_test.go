package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/front"
	"switchboard/internal/provider/mock"
)

// gateway is a Server behind a real HTTP listener.
type gateway struct {
	*Server
	URL  string
	logs *syncBuffer
	t    testing.TB
}

// syncBuffer lets the logger and the test read logs concurrently.
type syncBuffer struct {
	ch chan struct{}
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.ch <- struct{}{}
	defer func() { <-b.ch }()
	return b.Buffer.Write(p)
}

func (b *syncBuffer) String() string {
	b.ch <- struct{}{}
	defer func() { <-b.ch }()
	return b.Buffer.String()
}

// startGateway parses yaml (with ${UPSTREAM} style env already expanded by
// the caller) and serves it.
func startGateway(t testing.TB, yaml string) *gateway {
	t.Helper()
	return startGatewayClock(t, yaml, nil)
}

// startGatewayClock serves yaml with an injected clock (nil = real).
func startGatewayClock(t testing.TB, yaml string, clk clock.Clock) *gateway {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &syncBuffer{ch: make(chan struct{}, 1)}
	var w io.Writer = logs
	if testing.Verbose() {
		w = io.MultiWriter(logs, os.Stderr)
	}
	log := slog.New(front.LogHandler{Handler: slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})})
	s := New(log, clk, nil)
	s.Apply(cfg)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &gateway{Server: s, URL: ts.URL, logs: logs, t: t}
}

// mock returns the live mock provider instance by name.
func (g *gateway) mock(name string) *mock.Provider {
	g.t.Helper()
	p, ok := g.Provider(name).(*mock.Provider)
	if !ok {
		g.t.Fatalf("provider %s is not a mock", name)
	}
	return p
}

type answer struct {
	Status int
	Header http.Header
	Body   string
}

func (g *gateway) post(path, body string, headers ...string) answer {
	g.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return g.do(req)
}

func (g *gateway) get(path string, headers ...string) answer {
	g.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.URL+path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return g.do(req)
}

func (g *gateway) do(req *http.Request) answer {
	g.t.Helper()
	c := &http.Client{Timeout: 20 * time.Second, Transport: expectTransport}
	if req.ContentLength > 32<<10 {
		// As curl does for large bodies: a refusal (413, 401) then comes
		// before the body is sent. Without it, a client descheduled for
		// the server's 500 ms lingering close (under -race on a loaded
		// machine) was still writing when the closed connection reset,
		// and saw "connection reset by peer" instead of the answer.
		req.Header.Set("Expect", "100-continue")
	}
	resp, err := c.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// expectTransport waits long for a 100 Continue (the default is 1 s).
var expectTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ExpectContinueTimeout = 10 * time.Second
	return t
}()

// mockYAML is a one-model config over mock providers named in order.
func mockYAML(model string, providers ...string) string {
	var b strings.Builder
	b.WriteString("providers:\n")
	for _, p := range providers {
		b.WriteString("  " + p + ":\n    type: mock\n    mock: {tokens: 5}\n")
	}
	b.WriteString("models:\n  - name: " + model + "\n    providers:\n")
	for _, p := range providers {
		b.WriteString("      - provider: " + p + "\n        model: " + p + "-model\n")
	}
	b.WriteString("retries: {max_attempts: 2, max_rounds: 2, backoff_base: 0.01, max_backoff: 0.05}\n")
	return b.String()
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
