package server

import (
	"strings"
	"testing"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/provider"

	"github.com/tidwall/gjson"
)

// TestAdvisoryPrefix: limits.advisory_prefix renames the three headers, so
// a client written for MultiLLM's X-MultiLLM-RateLimit-* reads them
// unchanged; the default names are then absent.
func TestAdvisoryPrefix(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a")+`auth:
  keys:
    sk-two: {tenant: acme, rpm: 2}
limits: {advisory_headers: true, advisory_prefix: X-MultiLLM-RateLimit}
`)
	a := g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two")
	if a.Status != 200 || a.Header.Get("X-MultiLLM-RateLimit-Limit") != "2" || a.Header.Get("X-MultiLLM-RateLimit-Remaining") != "1" ||
		a.Header.Get("X-MultiLLM-RateLimit-Reset") == "" {
		t.Fatalf("%d %v", a.Status, a.Header)
	}
	if a.Header.Get("X-Switchboard-RateLimit-Limit") != "" {
		t.Fatalf("default names still sent: %v", a.Header)
	}
	g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two")
	r := g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two")
	if r.Status != 429 || gjson.Get(r.Body, "error.code").String() != "rate_limit_exceeded" ||
		r.Header.Get("X-MultiLLM-RateLimit-Remaining") != "0" || r.Header.Get("X-MultiLLM-RateLimit-Reset") != r.Header.Get("Retry-After") {
		t.Fatalf("refusal: %d %v", r.Status, r.Header)
	}
}

// TestOn429 compares the two rules for an upstream 429 (the first answers
// of provider a are 429 with a stated 20 ms reset): pause (default) pauses
// a and falls through to b at once; retry (llmshim's rule) retries a after
// the stated wait, up to max_attempts, without pausing it, then falls
// through.
func TestOn429(t *testing.T) {
	base := `providers:
  a: {type: mock, mock: {tokens: 3, fail_first: FAILS, fail_status: 429, fail_headers: {x-ratelimit-reset-requests: 20ms}}}
  b: {type: mock, mock: {tokens: 3}}
models:
  - name: m
    providers: [{provider: a}, {provider: b}]
`
	tests := []struct {
		name, fails, retries string
		served               string
		callsA               int64
		pausedA              bool
	}{
		{"pause is the default", "1", "retries: {max_attempts: 3}\n", "b", 1, true},
		{"retry serves from the same provider", "2", "retries: {max_attempts: 3, on_429: retry}\n", "a", 3, false},
		{"retry stops at max_attempts", "5", "retries: {max_attempts: 2, max_rounds: 1, on_429: retry}\n", "b", 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startGateway(t, strings.Replace(base, "FAILS", tt.fails, 1)+tt.retries)
			a := g.post("/v1/chat/completions", chatBody)
			if a.Status != 200 || a.Header.Get("X-Switchboard-Provider") != tt.served {
				t.Fatalf("%d served by %q: %s", a.Status, a.Header.Get("X-Switchboard-Provider"), a.Body)
			}
			if n := g.mock("a").Calls(); n != tt.callsA {
				t.Fatalf("provider a got %d calls, want %d", n, tt.callsA)
			}
			st := g.Health.Status("a")
			if paused := !st.PausedUntil.IsZero(); paused != tt.pausedA || st.CircuitOpen {
				t.Fatalf("a paused=%v circuit=%v", paused, st.CircuitOpen)
			}
		})
	}
}

// TestReloadAppliesUpstreamBounds: timeouts.open/read/write and
// performance.connection_max_age of a reloaded config reach the shared
// upstream pool (it was built once from the first config before).
func TestReloadAppliesUpstreamBounds(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	pool, ok := g.client.Transport.(*provider.Pool)
	if !ok {
		t.Fatalf("upstream transport is %T", g.client.Transport)
	}
	if o := pool.Options(); o.Read != 300*time.Second || o.MaxAge != 300*time.Second {
		t.Fatalf("defaults: %+v", o)
	}
	next, err := config.Parse([]byte(mockYAML("m", "a")+"timeouts: {open: 3, read: 7, write: 5}\nperformance: {connection_max_age: 90}\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g.Apply(next)
	want := provider.ClientOptions{Open: 3 * time.Second, Read: 7 * time.Second, Write: 5 * time.Second, MaxAge: 90 * time.Second}
	if o := pool.Options(); o != want {
		t.Fatalf("after reload: %+v, want %+v", o, want)
	}
	if a := g.post("/v1/chat/completions", chatBody); a.Status != 200 {
		t.Fatalf("after reload: %d %s", a.Status, a.Body)
	}
}
