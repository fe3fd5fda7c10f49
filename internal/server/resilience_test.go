package server

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/clock"
	"switchboard/internal/inference"
	"switchboard/internal/provider/mock"
)

const chatBody = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
const streamBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func failureDetailOf(t *testing.T, body string) (msg string, d inference.FailureDetail) {
	t.Helper()
	var e struct {
		Error struct {
			Message string                  `json:"message"`
			Detail  inference.FailureDetail `json:"detail"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not an error body: %s", body)
	}
	return e.Error.Message, e.Error.Detail
}

func TestRetriesAndFallback(t *testing.T) {
	tests := []struct {
		name       string
		scriptA    []mock.Fault
		scriptB    []mock.Fault
		wantStatus int
		wantBy     string
		wantCallsA int64
		wantCallsB int64
	}{
		{"503 retried on the same provider", []mock.Fault{{Status: 503}}, nil, 200, "a", 2, 0},
		{"transport error retried", []mock.Fault{{Transport: true}}, nil, 200, "a", 2, 0},
		{"408 retried", []mock.Fault{{Status: 408}}, nil, 200, "a", 2, 0},
		{"529 retried", []mock.Fault{{Status: 529}}, nil, 200, "a", 2, 0},
		{"attempts exhausted fall through", []mock.Fault{{Status: 500}, {Status: 502}}, nil, 200, "b", 2, 1},
		{"quota 429 falls through without retry", []mock.Fault{{Status: 429, Header: hdr("Retry-After", "30")}}, nil, 200, "b", 1, 1},
		{"402 falls through without retry", []mock.Fault{{Status: 402}}, nil, 200, "b", 1, 1},
		{"quota 403 falls through", []mock.Fault{{Status: 403, Body: []byte(`{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}`)}}, nil, 200, "b", 1, 1},
		{"plain 400 is not retried", []mock.Fault{{Status: 400, Body: []byte(`{"error":{"message":"bad"}}`)}}, nil, 200, "b", 1, 1},
		{"html 200 is a failure", []mock.Fault{{Garbage: true}, {Garbage: true}}, nil, 200, "b", 2, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, mockYAML("m", "a", "b"))
			g.mock("a").Script(tc.scriptA...)
			g.mock("b").Script(tc.scriptB...)
			a := g.post("/v1/chat/completions", chatBody)
			if a.Status != tc.wantStatus || a.Header.Get("X-Switchboard-Provider") != tc.wantBy {
				t.Fatalf("status %d by %q: %s", a.Status, a.Header.Get("X-Switchboard-Provider"), a.Body)
			}
			if ca, cb := g.mock("a").Calls(), g.mock("b").Calls(); ca != tc.wantCallsA || cb != tc.wantCallsB {
				t.Fatalf("calls a=%d b=%d, want %d %d", ca, cb, tc.wantCallsA, tc.wantCallsB)
			}
		})
	}
}

func TestQuotaPauseSkipsProviderUntilReset(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a", "b"))
	g.mock("a").Script(mock.Fault{Status: 429, Header: hdr("Retry-After", "3600")})
	for i := 0; i < 3; i++ {
		if a := g.post("/v1/chat/completions", chatBody); a.Status != 200 || a.Header.Get("X-Switchboard-Provider") != "b" {
			t.Fatalf("request %d: %d by %s", i, a.Status, a.Header.Get("X-Switchboard-Provider"))
		}
	}
	if c := g.mock("a").Calls(); c != 1 {
		t.Fatalf("paused provider got %d calls, want 1", c)
	}
	st := g.Health.Status("a")
	if st.PauseReason != "rate_limited" || time.Until(st.PausedUntil) < 59*time.Minute {
		t.Fatalf("pause = %+v", st)
	}
	// A shorter stated reset never shortens the pause.
	g.Health.Pause("a", 0, 0, time.Second, "rate_limited")
	if st2 := g.Health.Status("a"); !st2.PausedUntil.Equal(st.PausedUntil) {
		t.Fatalf("pause shortened from %v to %v", st.PausedUntil, st2.PausedUntil)
	}
}

func TestSingleProviderWaitsForShortRetryAfter(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	g.mock("a").Script(mock.Fault{Status: 429, Header: hdr("Retry-After", "0.1")})
	a := g.post("/v1/chat/completions", chatBody)
	if a.Status != 200 || g.mock("a").Calls() != 2 {
		t.Fatalf("status %d after %d calls: %s", a.Status, g.mock("a").Calls(), a.Body)
	}
}

func TestAllProvidersFailed(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a", "b")+"health: {breaker: {threshold: 0}}\n")
	for _, p := range []string{"a", "b"} {
		g.mock(p).Script(mock.Fault{Status: 500}, mock.Fault{Status: 500}, mock.Fault{Status: 503}, mock.Fault{Status: 503})
	}
	a := g.post("/v1/chat/completions", chatBody)
	if a.Status != 503 || a.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q: %s", a.Status, a.Header.Get("Retry-After"), a.Body)
	}
	msg, d := failureDetailOf(t, a.Body)
	want := "All providers failed: a: server_error (status=500); a: server_error (status=500); b: server_error (status=500); b: server_error (status=500); a: server_error (status=503)"
	if !strings.HasPrefix(msg, want) {
		t.Fatalf("message\n%s\nwant prefix\n%s", msg, want)
	}
	if len(d.Attempts) != 8 || d.Attempts[0].Provider != "a" || d.Attempts[7].Status != 503 || d.DeadlineHit {
		t.Fatalf("detail = %+v", d)
	}
}

func TestStaleConnectionRetriesAreFree(t *testing.T) {
	var n atomic.Int64
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		if n.Add(1) <= 2 {
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close() // EOF before any response byte
			return
		}
		okChat(w, r, b)
	})
	g := startGateway(t, upstreamYAML("up", u.URL, "retries: {max_attempts: 1, max_rounds: 1}\n"))
	if a := g.post("/v1/chat/completions", chatBody); a.Status != 200 {
		t.Fatalf("status %d: %s", a.Status, a.Body)
	}
	if n.Load() != 3 {
		t.Fatalf("upstream saw %d requests, want 3", n.Load())
	}
}

func TestAPIKeysRotateAndPausePerKey(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		k := r.Header.Get("Authorization")
		mu.Lock()
		seen[k]++
		mu.Unlock()
		if k == "Bearer k1" {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"slow down"}}`)
			return
		}
		okChat(w, r, b)
	})
	yaml := strings.Replace(upstreamYAML("up", u.URL, "retries: {max_attempts: 1, max_rounds: 2, backoff_base: 0.01, max_backoff: 0.05}\n"),
		"api_key: upstream-key", "api_keys: [k1, k2, k3]", 1)
	g := startGateway(t, yaml)
	for i := 0; i < 6; i++ {
		if a := g.post("/v1/chat/completions", chatBody); a.Status != 200 {
			t.Fatalf("request %d: %d %s", i, a.Status, a.Body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["Bearer k1"] != 1 || seen["Bearer k2"] < 2 || seen["Bearer k3"] < 2 {
		t.Fatalf("keys used: %v", seen)
	}
	if st := g.Health.Status("up"); !st.PausedUntil.IsZero() {
		t.Fatalf("provider paused although two keys are fine: %+v", st)
	}
}

func TestCircuitBreakerOpensAndProbes(t *testing.T) {
	// An injected clock: with a real 150 ms cooldown a loaded machine could
	// let the re-opened circuit cool down again before the burst was over.
	// One attempt per provider and one round, so no backoff waits on it.
	yaml := strings.Replace(mockYAML("m", "a", "b"), "retries: {max_attempts: 2, max_rounds: 2,", "retries: {max_attempts: 1, max_rounds: 1,", 1) +
		"health: {breaker: {threshold: 2, window: 60, cooldown: 10}}\n"
	clk := clock.NewFake(time.Now())
	g := startGatewayClock(t, yaml, clk)
	fails := make([]mock.Fault, 10)
	for i := range fails {
		fails[i] = mock.Fault{Status: 500}
	}
	g.mock("a").Script(fails...)
	// Two failures open a's circuit; b serves both requests.
	for i := 0; i < 2; i++ {
		if a := g.post("/v1/chat/completions", chatBody); a.Header.Get("X-Switchboard-Provider") != "b" {
			t.Fatalf("request %d by %q: %d %s", i, a.Header.Get("X-Switchboard-Provider"), a.Status, a.Body)
		}
	}
	if !g.Health.Status("a").CircuitOpen {
		t.Fatal("circuit not open after 2 failures")
	}
	for i := 0; i < 3; i++ {
		g.post("/v1/chat/completions", chatBody)
	}
	if c := g.mock("a").Calls(); c != 2 {
		t.Fatalf("open circuit still got calls: %d", c)
	}
	// After the cooldown exactly one probe goes through; it fails and the
	// circuit re-opens.
	clk.Advance(11 * time.Second)
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); g.post("/v1/chat/completions", chatBody) }()
	}
	wg.Wait()
	if c := g.mock("a").Calls(); c != 3 {
		t.Fatalf("half-open let %d probes through, want 1", c-2)
	}
	if !g.Health.Status("a").CircuitOpen {
		t.Fatal("failed probe did not re-open the circuit")
	}
}

func TestSingleProviderWithOpenCircuitStillDispatches(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a")+"health: {breaker: {threshold: 1, cooldown: 3600}}\n")
	g.mock("a").Script(mock.Fault{Status: 500}, mock.Fault{Status: 500}, mock.Fault{Status: 500}, mock.Fault{Status: 500})
	g.post("/v1/chat/completions", chatBody)
	if !g.Health.Status("a").CircuitOpen {
		t.Fatal("circuit should be open")
	}
	if a := g.post("/v1/chat/completions", chatBody); a.Status != 200 {
		t.Fatalf("single provider not dispatched: %d %s", a.Status, a.Body)
	}
}

// readStream returns the data payloads of a streamed answer.
func readStream(t *testing.T, resp *http.Response) []string {
	t.Helper()
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func streamText(events []string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(gjson.Get(e, "choices.0.delta.content").String())
	}
	return b.String()
}

func TestStreamFallsBackBeforeFirstToken(t *testing.T) {
	roleOnly := []byte("data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n")
	tests := []struct {
		name  string
		fault mock.Fault
	}{
		{"ends before content", mock.Fault{Status: 200, Body: roleOnly}},
		{"error event before content", mock.Fault{Status: 200, Body: append(append([]byte{}, roleOnly...), "data: {\"error\":{\"message\":\"overloaded\"}}\n\n"...)}},
		{"DONE before content", mock.Fault{Status: 200, Body: append(append([]byte{}, roleOnly...), "data: [DONE]\n\n"...)}},
		{"broken line before content", mock.Fault{Garbage: true}},
		{"503 before the stream", mock.Fault{Status: 503}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, strings.Replace(mockYAML("m", "a", "b"), "max_attempts: 2", "max_attempts: 1", 1))
			g.mock("a").Script(tc.fault)
			resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || resp.Header.Get("X-Switchboard-Provider") != "b" {
				t.Fatalf("status %d by %q", resp.StatusCode, resp.Header.Get("X-Switchboard-Provider"))
			}
			evs := readStream(t, resp)
			if txt := streamText(evs); !strings.HasPrefix(txt, "Hello from b!") || strings.Contains(strings.Join(evs, ""), "overloaded") {
				t.Fatalf("client saw %q", evs)
			}
			if evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("no [DONE]: %q", evs)
			}
		})
	}
}

func TestStreamFailureAfterContentEndsWithErrorEvent(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a", "b"))
	g.mock("a").Script(mock.Fault{CutAfter: 2})
	resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
	if err != nil {
		t.Fatal(err)
	}
	evs := readStream(t, resp)
	if resp.Header.Get("X-Switchboard-Provider") != "a" || g.mock("b").Calls() != 0 {
		t.Fatal("fell back after bytes reached the client")
	}
	n := len(evs)
	if n < 3 || evs[n-1] != "[DONE]" || !gjson.Get(evs[n-2], "error.message").Exists() || streamText(evs) != "Hello from a! token 2" {
		t.Fatalf("events: %q", evs)
	}
}

func TestTTFTTimeoutFallsBackInvisibly(t *testing.T) {
	clk := clock.NewFake(time.Now())
	g := startGatewayClock(t, mockYAML("m", "a", "b")+"timeouts: {ttft: 2}\n", clk)
	g.mock("a").Script(mock.Fault{TTFT: time.Hour})
	done := make(chan []string)
	var served string
	go func() {
		resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
		if err != nil {
			done <- nil
			return
		}
		served = resp.Header.Get("X-Switchboard-Provider")
		done <- readStream(t, resp)
	}()
	waitFor(t, func() bool { return clk.Waiters() == 1 && g.mock("a").Calls() == 1 })
	clk.Advance(2 * time.Second)
	evs := <-done
	if served != "b" || !strings.HasPrefix(streamText(evs), "Hello from b!") {
		t.Fatalf("served by %q: %q", served, evs)
	}
	if !strings.Contains(g.logs.String(), "reason=ttft_timeout") {
		t.Fatal("ttft timeout not logged")
	}
}

func TestModelTTFTFalseDisablesGate(t *testing.T) {
	yaml := strings.Replace(mockYAML("m", "a", "b"), "  - name: m\n", "  - name: m\n    ttft_timeout: false\n", 1) + "timeouts: {ttft: 1}\n"
	clk := clock.NewFake(time.Now())
	g := startGatewayClock(t, yaml, clk)
	g.mock("a").Script(mock.Fault{TTFT: 50 * time.Millisecond})
	resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
	if err != nil {
		t.Fatal(err)
	}
	readStream(t, resp)
	if resp.Header.Get("X-Switchboard-Provider") != "a" {
		t.Fatalf("served by %q", resp.Header.Get("X-Switchboard-Provider"))
	}
}

func TestRequestDeadline(t *testing.T) {
	clk := clock.NewFake(time.Now())
	g := startGatewayClock(t, mockYAML("m", "a")+"timeouts: {request: 5}\n", clk)
	g.mock("a").Script(mock.Fault{Hang: true})
	done := make(chan answer)
	go func() { done <- g.post("/v1/chat/completions", chatBody) }()
	waitFor(t, func() bool { return clk.Waiters() == 1 && g.mock("a").Calls() == 1 })
	clk.Advance(5 * time.Second)
	a := <-done
	if a.Status != 504 {
		t.Fatalf("status %d: %s", a.Status, a.Body)
	}
	if _, d := failureDetailOf(t, a.Body); !d.DeadlineHit {
		t.Fatalf("deadline_hit not set: %s", a.Body)
	}
}

func TestResponsesStreamWithoutOutputGetsFailedEvent(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	g.mock("a").Script(mock.Fault{Status: 200, Body: []byte("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n")})
	resp, err := http.Post(g.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","stream":true,"input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "event: response.failed") || !strings.Contains(string(b), `"code":"upstream_stopped"`) {
		t.Fatalf("stream: %s", b)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
