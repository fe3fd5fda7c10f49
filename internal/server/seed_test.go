package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/admit"
	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/provider"
	"switchboard/internal/provider/mock"
	"switchboard/internal/store"

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

// TestResponsesNotFoundStream: a /v1/responses stream ending in
// response.not_found (LLM Proxy's stand-in for response.failed) gets the
// treatment of an empty stream: response.failed with code upstream_stopped,
// placed before any [DONE] so clients read it; with tracking.responses the
// gate fails it before the first token and the next provider serves.
func TestResponsesNotFoundStream(t *testing.T) {
	const created = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n"
	const notFound = "event: response.not_found\ndata: {\"type\":\"response.not_found\",\"response\":{\"id\":\"r\",\"status\":\"failed\",\"error\":{\"code\":\"upstream_stopped\"}}}\n\n"
	const done = "data: [DONE]\n\n"
	const good = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\"}}\n\n"
	tests := []struct {
		name, body string
		failed     bool
	}{
		{"not_found then end", created + notFound, true},
		{"not_found then [DONE]", created + notFound + done, true},
		{"empty then [DONE]", created + done, true},
		{"completed then [DONE]", created + good + done, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startGateway(t, mockYAML("m", "a"))
			g.mock("a").Script(mock.Fault{Status: 200, Body: []byte(tt.body)})
			a := g.post("/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
			failedAt := strings.Index(a.Body, "event: response.failed")
			if (failedAt >= 0) != tt.failed {
				t.Fatalf("response.failed present = %v:\n%s", failedAt >= 0, a.Body)
			}
			if tt.failed && !strings.Contains(a.Body[failedAt:], `"code":"upstream_stopped"`) {
				t.Fatalf("no upstream_stopped code:\n%s", a.Body)
			}
			if n := strings.Count(a.Body, "[DONE]"); strings.Contains(tt.body, "[DONE]") && n != 1 {
				t.Fatalf("[DONE] %d times:\n%s", n, a.Body)
			}
			if d := strings.Index(a.Body, "[DONE]"); d >= 0 && failedAt > d {
				t.Fatalf("response.failed after [DONE], where clients stop reading:\n%s", a.Body)
			}
		})
	}
	t.Run("gated: the next provider serves", func(t *testing.T) {
		g := startGateway(t, mockYAML("m", "a", "b")+"tracking: {responses: true}\n")
		g.mock("a").Script(mock.Fault{Status: 200, Body: []byte(created + notFound + done)})
		a := g.post("/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
		if a.Status != 200 || a.Header.Get("X-Switchboard-Provider") != "b" || strings.Contains(a.Body, "not_found") {
			t.Fatalf("%d by %q:\n%s", a.Status, a.Header.Get("X-Switchboard-Provider"), a.Body)
		}
	})
}

// TestSlidingWindowSeedExample is MultiLLM's example through the real
// server, on the memory and the SQLite store: with limits.window: sliding,
// two requests a minute answer Remaining 1 then 0 with Reset 60 then 43
// (the second 17 s after the first), and the refusal after them says 43.
func TestSlidingWindowSeedExample(t *testing.T) {
	for _, backend := range []string{"memory", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_700_000_040, 0))
			yaml := mockYAML("m", "a") + `auth:
  keys:
    sk-two: {tenant: acme, rpm: 2}
limits: {advisory_headers: true, advisory_prefix: X-MultiLLM-RateLimit, window: {rpm: sliding}}
`
			cfg, err := config.Parse([]byte(yaml), "test.yaml")
			if err != nil {
				t.Fatal(err)
			}
			st := store.NewMemory()
			if backend == "sqlite" {
				if st, err = store.OpenSQLite(filepath.Join(t.TempDir(), "s.db")); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { st.Close() })
			s := New(slog.New(slog.NewTextHandler(io.Discard, nil)), clk, nil)
			s.Admission = admit.New(st, clk, s.Metrics.Registry)
			s.Apply(cfg)
			ts := httptest.NewServer(s.Handler())
			t.Cleanup(ts.Close)
			g := &gateway{Server: s, URL: ts.URL, t: t}

			want := [][2]string{{"1", "60"}, {"0", "43"}}
			for i, w := range want {
				if i == 1 {
					clk.Advance(17 * time.Second)
				}
				a := g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two")
				if a.Status != 200 || a.Header.Get("X-MultiLLM-RateLimit-Limit") != "2" ||
					a.Header.Get("X-MultiLLM-RateLimit-Remaining") != w[0] || a.Header.Get("X-MultiLLM-RateLimit-Reset") != w[1] {
					t.Fatalf("request %d: %d %v", i+1, a.Status, a.Header)
				}
			}
			r := g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two")
			if r.Status != 429 || r.Header.Get("Retry-After") != "43" || r.Header.Get("X-MultiLLM-RateLimit-Reset") != "43" ||
				r.Header.Get("X-MultiLLM-RateLimit-Remaining") != "0" {
				t.Fatalf("refusal: %d %v %s", r.Status, r.Header, r.Body)
			}
			clk.Advance(43 * time.Second)
			if a := g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two"); a.Status != 200 || a.Header.Get("X-MultiLLM-RateLimit-Reset") != "17" {
				t.Fatalf("after the first left the window: %d %v", a.Status, a.Header)
			}
		})
	}
}

// TestUsageRateLimits: GET /v1/usage carries rate_limits only with
// advisory headers on, and then it describes the caller's own counter;
// the provider-wide buckets are shown only to an operator (an admin key)
// as provider_limits.
func TestUsageRateLimits(t *testing.T) {
	base := strings.Replace(mockYAML("m", "a"), "    mock: {tokens: 5}\n", "    mock: {tokens: 5}\n    rpm: 50\n", 1) + `auth:
  keys:
    sk-two: {tenant: acme, rpm: 2}
    sk-admin: {tenant: ops, role: admin}
`
	for _, advisory := range []bool{false, true} {
		yaml := base
		if advisory {
			yaml += "limits: {advisory_headers: true}\n"
		}
		g := startGateway(t, yaml)
		if a := g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two"); a.Status != 200 {
			t.Fatalf("%d %s", a.Status, a.Body)
		}
		u := g.get("/v1/usage", "x-api-key", "sk-two")
		if u.Status != 200 || gjson.Get(u.Body, "rate_limits").Exists() != advisory || gjson.Get(u.Body, "provider_limits").Exists() {
			t.Fatalf("advisory %v, tenant: %s", advisory, u.Body)
		}
		if advisory {
			if gjson.Get(u.Body, "rate_limits.a").Exists() {
				t.Fatalf("a tenant saw a provider name: %s", u.Body)
			}
			own := gjson.Get(u.Body, "rate_limits.m")
			if own.Get("limit").Int() != 2 || own.Get("remaining").Int() != 1 {
				t.Fatalf("rate_limits should be the caller's rpm 2 counter: %s", u.Body)
			}
		}
		ad := g.get("/v1/usage", "x-api-key", "sk-admin")
		if advisory && !gjson.Get(ad.Body, "rate_limits").Exists() {
			t.Fatalf("admin rate_limits: %s", ad.Body)
		}
		if ad.Status != 200 || gjson.Get(ad.Body, "provider_limits.a.limit").Int() != 50 || gjson.Get(ad.Body, "provider_limits.a.remaining").Int() != 49 {
			t.Fatalf("admin view: %s", ad.Body)
		}
	}
}

// TestSpendSeedParity: a failed attempt the provider says it billed is
// charged (its error body is read before the retry), and a bill reported
// while choices are still generating is a floor: shown to the client as
// usage.provider_cost_floor_usd (never cost_usd) and not settled below
// when the stream ends with a smaller catalog estimate.
func TestSpendSeedParity(t *testing.T) {
	pricing := `auth:
  keys:
    k: {tenant: acme, budget_usd: 10}
pricing:
  up:
    upstream-model: {input: 1, output: 1, context: 1000, max_output: 100}
retries: {max_attempts: 2, max_rounds: 1, backoff_base: 0.01, max_backoff: 0.02}
`
	// spent reads the key's spend field (nano-USD) from /v1/usage.
	spent := func(t *testing.T, g *gateway, field string, want int64, why string) {
		t.Helper()
		usage := g.get("/v1/usage", "x-api-key", "k")
		if got := gjson.Get(usage.Body, "spend."+field).Int(); got != want {
			t.Fatalf("%s %d nano-USD, want %s: %s", field, got, why, usage.Body)
		}
	}
	t.Run("a charged failure is charged", func(t *testing.T) {
		var calls atomic.Int64
		u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Type", "application/json")
			if calls.Add(1) == 1 {
				w.WriteHeader(502)
				io.WriteString(w, `{"error":{"message":"generation failed midway","type":"server_error"},"usage":{"prompt_tokens":10,"completion_tokens":5,"cost":0.5}}`)
				return
			}
			io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"cost":0.25}}`)
		})
		g := startGateway(t, upstreamYAML("up", u.URL, pricing))
		if a := g.post("/v1/chat/completions", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "k"); a.Status != 200 {
			t.Fatalf("%d %s", a.Status, a.Body)
		}
		spent(t, g, "settled_nano_usd", 750_000_000, "0.5 (the billed failure) + 0.25")
	})
	t.Run("a cut stream's usage raises the hold", func(t *testing.T) {
		u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":" there"}}],"usage":{"prompt_tokens":10,"completion_tokens":2,"cost":0.3}}`+"\n\n")
			// cut: no finish_reason, no [DONE]
		})
		g := startGateway(t, upstreamYAML("up", u.URL, pricing))
		g.post("/v1/chat/completions", `{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "k")
		spent(t, g, "reserved_nano_usd", 300_000_000, "the reported 0.3 USD kept")
	})
	t.Run("a nonterminal bill is a floor", func(t *testing.T) {
		u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":{"prompt_tokens":10,"completion_tokens":1,"cost":0.3}}`+"\n\n")
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
			io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2}}`+"\n\n")
			io.WriteString(w, "data: [DONE]\n\n")
		})
		g := startGateway(t, upstreamYAML("up", u.URL, pricing))
		a := g.post("/v1/chat/completions", `{"model":"m","stream":true,"max_tokens":10,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "k")
		first := a.Body[:strings.Index(a.Body, "\n\n")]
		if !strings.Contains(first, `"provider_cost_floor_usd":0.3`) || strings.Contains(first, "cost_usd\":0.3") {
			t.Fatalf("first chunk: %s", first)
		}
		spent(t, g, "settled_nano_usd", 300_000_000, "the 0.3 USD floor over the catalog's 12 tokens")
	})
}
