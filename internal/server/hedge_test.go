package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/tidwall/gjson"

	"switchboard/internal/clock"
	"switchboard/internal/health"
	"switchboard/internal/route"
)

// hedgeUp is an OpenAI-compatible upstream for hedging tests. Every
// content chunk names it, so a client can tell whose bytes it got. It
// holds each answer (before a stream's first token, before a unary
// answer's headers) until release is closed or, without release, for
// delay(); a held request whose caller goes away is counted as canceled.
type hedgeUp struct {
	name     string
	srv      *httptest.Server
	calls    atomic.Int64
	canceled atomic.Int64
	mu       sync.Mutex
	release  chan struct{}
	delay    func() time.Duration
	// status, when set, fails every request with it after the hold.
	status int
	// opts are extra provider settings (YAML flow entries).
	opts string
}

func newHedgeUp(t *testing.T, name string, held bool) *hedgeUp {
	u := &hedgeUp{name: name}
	if held {
		u.release = make(chan struct{})
	}
	u.srv = httptest.NewServer(u)
	t.Cleanup(u.srv.Close)
	t.Cleanup(u.free) // a held handler must end before Close can return
	return u
}

// free lets every held answer go (once).
func (u *hedgeUp) free() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.release != nil {
		select {
		case <-u.release:
		default:
			close(u.release)
		}
	}
}

// hold makes the next answers wait for free again.
func (u *hedgeUp) hold() {
	u.mu.Lock()
	u.release = make(chan struct{})
	u.mu.Unlock()
}

func (u *hedgeUp) gate() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.release
}

const hedgeChunks = 4

func (u *hedgeUp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	stream := gjson.GetBytes(body, "stream").Bool()
	fl, _ := w.(http.Flusher)
	if stream && u.status == 0 {
		// Headers and a role-only chunk at once: a stream that has
		// answered but not yet produced its first token.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		fl.Flush()
	}
	var wait <-chan time.Time
	if u.delay != nil {
		t := time.NewTimer(u.delay())
		defer t.Stop()
		wait = t.C
	}
	if gate := u.gate(); gate != nil || wait != nil {
		select {
		case <-gate:
		case <-wait:
		case <-r.Context().Done():
			u.canceled.Add(1)
			return
		}
	}
	if u.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(u.status)
		fmt.Fprintf(w, `{"error":{"message":"%s failed","type":"server_error"}}`, u.name)
		return
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}`,
			strings.Repeat(u.name+" ", hedgeChunks), hedgeChunks, 5+hedgeChunks)
		return
	}
	for i := 0; i < hedgeChunks; i++ {
		fmt.Fprintf(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"%s "},"finish_reason":null}]}`+"\n\n", u.name)
		fl.Flush()
	}
	fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
	fmt.Fprintf(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", hedgeChunks, 5+hedgeChunks)
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// want is the text a client gets from u alone.
func (u *hedgeUp) want() string { return strings.Repeat(u.name+" ", hedgeChunks) }

// hedgeYAML routes model m to ups in order, hedged per hedge (a YAML flow
// mapping), plus extra top-level config.
func hedgeYAML(ups []*hedgeUp, hedge, extra string) string {
	var b strings.Builder
	b.WriteString("providers:\n")
	for _, u := range ups {
		opts := ""
		if u.opts != "" {
			opts = ", " + u.opts
		}
		fmt.Fprintf(&b, "  %s: {type: openai, base_url: %q, api_key: k-%s%s}\n", u.name, u.srv.URL, u.name, opts)
	}
	b.WriteString("models:\n  - name: m\n    hedge: " + hedge + "\n    providers:\n")
	for _, u := range ups {
		fmt.Fprintf(&b, "      - {provider: %s, model: %s-model}\n", u.name, u.name)
	}
	b.WriteString("retries: {max_attempts: 1, max_rounds: 1, backoff_base: 0.01}\n")
	b.WriteString("performance: {probing_enabled: false}\n")
	return b.String() + extra
}

// startHedged serves hedgeYAML(ups, hedge, extra); held upstreams are
// freed before the gateway's listener closes, so it need not wait for them.
func startHedged(t *testing.T, clk clock.Clock, ups []*hedgeUp, hedge, extra string) *gateway {
	g := startGatewayClock(t, hedgeYAML(ups, hedge, extra), clk)
	t.Cleanup(func() {
		for _, u := range ups {
			u.free()
		}
	})
	return g
}

func counter(c *prometheus.CounterVec, labels ...string) float64 {
	var m dto.Metric
	if err := c.WithLabelValues(labels...).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// hedgeCall sends one request in the background; its answer arrives on
// the returned channel as the provider-named text (or the error body).
func hedgeCall(t *testing.T, g *gateway, ctx context.Context, stream bool, headers ...string) <-chan answer {
	t.Helper()
	body := chatBody
	if stream {
		body = streamBody
	}
	out := make(chan answer, 1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- answer{Status: -1, Body: err.Error()}
			return
		}
		a := answer{Status: resp.StatusCode, Header: resp.Header}
		if stream && resp.StatusCode == 200 {
			a.Body = streamText(readStream(t, resp))
		} else {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a.Body = gjson.GetBytes(b, "choices.0.message.content").String()
			if resp.StatusCode != 200 {
				a.Body = string(b)
			}
		}
		out <- a
	}()
	return out
}

// advanceUntil moves the fake clock by step until cond holds: the race's
// timer may be armed a moment after the upstream saw the request.
func advanceUntil(t *testing.T, clk *clock.Fake, step time.Duration, cond func() bool) {
	t.Helper()
	waitFor(t, func() bool {
		if cond() {
			return true
		}
		clk.Advance(step)
		return cond()
	})
}

func recv(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return answer{}
	}
}

// TestHedgeWinsAfterDelay: the original provider holds its first token
// (stream) or its headers (unary); once the delay passes on the clock a
// hedge goes to the second provider, whose answer the client gets whole,
// and the original's request is canceled upstream.
func TestHedgeWinsAfterDelay(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			a, b := newHedgeUp(t, "a", true), newHedgeUp(t, "b", false)
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			g := startHedged(t, clk, []*hedgeUp{a, b}, "{after: 300ms}", "")
			ch := hedgeCall(t, g, context.Background(), stream)
			waitFor(t, func() bool { return a.calls.Load() == 1 })
			if b.calls.Load() != 0 {
				t.Fatal("hedged before the delay passed")
			}
			advanceUntil(t, clk, 300*time.Millisecond, func() bool { return b.calls.Load() == 1 })
			ans := recv(t, ch)
			if ans.Status != 200 || ans.Body != b.want() || ans.Header.Get("X-Switchboard-Provider") != "b" {
				t.Fatalf("answer %d %q by %q, want b's", ans.Status, ans.Body, ans.Header.Get("X-Switchboard-Provider"))
			}
			waitFor(t, func() bool { return a.canceled.Load() == 1 })
			g.proxy.WaitHedges()
			if ss := g.Stats.Samples("m", "a"); stream && (len(ss) != 1 || ss[0].TTFT < 0.3) {
				// The original's wait, a lower bound of its TTFT, keeps a
				// percentile delay from drifting down to the winners'.
				t.Fatalf("samples of the canceled original: %+v, want its 0.3 s wait", ss)
			}
			h := g.Metrics.Hedge
			if counter(h.Started, "m", "b") != 1 || counter(h.Won, "m", "b", "hedge") != 1 || counter(h.Won, "m", "a", "original") != 0 {
				t.Fatalf("metrics: started %v won-by-hedge %v", counter(h.Started, "m", "b"), counter(h.Won, "m", "b", "hedge"))
			}
			if logs := g.logs.String(); !regexp.MustCompile(`msg=hedge .*won_by=hedge .*request_id=req_`).MatchString(logs) {
				t.Fatalf("no hedge log line with the request's id:\n%s", logs)
			}
		})
	}
}

// TestHedgeOriginalWins: the hedge starts but the original answers first:
// the client gets the original's bytes only and the hedge is canceled
// upstream.
func TestHedgeOriginalWins(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			a, b := newHedgeUp(t, "a", true), newHedgeUp(t, "b", true)
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			g := startHedged(t, clk, []*hedgeUp{a, b}, "{after: p90}", "")
			// p90 (nearest rank) of the original's measured TTFT: 0.9 s.
			for i := 1; i <= 10; i++ {
				g.Stats.Record("m", "a", routeSample(float64(i)/10))
			}
			ch := hedgeCall(t, g, context.Background(), stream)
			waitFor(t, func() bool { return a.calls.Load() == 1 })
			clk.Advance(900 * time.Millisecond)
			advanceUntil(t, clk, 100*time.Millisecond, func() bool { return b.calls.Load() == 1 })
			a.free()
			ans := recv(t, ch)
			if ans.Status != 200 || ans.Body != a.want() || ans.Header.Get("X-Switchboard-Provider") != "a" {
				t.Fatalf("answer %d %q by %q, want a's", ans.Status, ans.Body, ans.Header.Get("X-Switchboard-Provider"))
			}
			waitFor(t, func() bool { return b.canceled.Load() == 1 })
			g.proxy.WaitHedges()
			if h := g.Metrics.Hedge; counter(h.Started, "m", "b") != 1 || counter(h.Won, "m", "a", "original") != 1 {
				t.Fatalf("metrics: started %v won-by-original %v", counter(h.Started, "m", "b"), counter(h.Won, "m", "a", "original"))
			}
		})
	}
}

// TestHedgePercentileDelay: the delay is the running provider's measured
// TTFT percentile: nothing is hedged before it, and without enough
// samples there is no hedge at all.
func TestHedgePercentileDelay(t *testing.T) {
	a, b := newHedgeUp(t, "a", true), newHedgeUp(t, "b", false)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	g := startHedged(t, clk, []*hedgeUp{a, b}, "{after: p50}", "")
	base := clk.Waiters()
	ch := hedgeCall(t, g, context.Background(), true)
	waitFor(t, func() bool { return a.calls.Load() == 1 && clk.Waiters() > base })
	clk.Advance(time.Minute) // no samples: no hedge timer was armed
	a.free()
	if ans := recv(t, ch); ans.Body != a.want() || b.calls.Load() != 0 {
		t.Fatalf("answer %q, b called %d times: hedged without samples", ans.Body, b.calls.Load())
	}

	a.hold()
	for i := 0; i < 5; i++ {
		g.Stats.Record("m", "a", routeSample(2)) // the median, whatever the first request measured
	}
	ch = hedgeCall(t, g, context.Background(), true)
	// Armed: the deadline watcher and the hedge timer.
	waitFor(t, func() bool { return a.calls.Load() == 2 && clk.Waiters() >= base+2 })
	clk.Advance(1900 * time.Millisecond)
	if b.calls.Load() != 0 {
		t.Fatal("hedged before the p50 delay")
	}
	advanceUntil(t, clk, 100*time.Millisecond, func() bool { return b.calls.Load() == 1 })
	if ans := recv(t, ch); ans.Body != b.want() {
		t.Fatalf("answer %q, want b's", ans.Body)
	}
}

func routeSample(ttft float64) route.Sample { return route.Sample{TTFT: ttft, TPS: 50, Tokens: 10} }

// TestNoHedgeWhenSecondCannotTakeIt: past the delay, no hedge goes to a
// provider that is paused, open, refused by admission, or that the
// request's budget cannot reserve for next to the running attempt; the
// original still answers.
func TestNoHedgeWhenSecondCannotTakeIt(t *testing.T) {
	const priced = "pricing:\n  a: {a-model: {input: 1000, output: 1000, context: 1000, max_output: 100}}\n" +
		"  b: {b-model: {input: 1000, output: 1000, context: 1000, max_output: 100}}\n"
	tests := []struct {
		name   string
		bOpts  string // the second provider's extra settings
		extra  string
		key    string
		prep   func(g *gateway)
		reason string
	}{
		// An unavailable provider is not even a candidate: no race, no timer.
		{name: "paused", prep: func(g *gateway) { g.Health.Pause("b", 0, 1, time.Hour, health.ReasonRateLimited) }},
		{name: "circuit open", extra: "health: {breaker: {threshold: 1}}\n",
			prep: func(g *gateway) { g.Health.Observe("b", health.Failure) }},
		{name: "refused by admission", bOpts: "rpm: 0", reason: "why=rate_limit_exceeded"},
		{name: "budget covers one reservation", extra: priced + "auth: {keys: {k: {tenant: acme, budget_usd: 0.4}}}\n", key: "k",
			reason: "why=budget_exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newHedgeUp(t, "a", true), newHedgeUp(t, "b", false)
			b.opts = tc.bOpts
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			g := startHedged(t, clk, []*hedgeUp{a, b}, "{after: 300ms}", tc.extra)
			if tc.prep != nil {
				tc.prep(g)
			}
			var hdr []string
			if tc.key != "" {
				hdr = []string{"x-api-key", tc.key}
			}
			base := clk.Waiters()
			ch := hedgeCall(t, g, context.Background(), true, hdr...)
			waitFor(t, func() bool { return a.calls.Load() == 1 && clk.Waiters() > base })
			if tc.reason == "" {
				clk.Advance(10 * time.Second)
			} else {
				advanceUntil(t, clk, 300*time.Millisecond, func() bool { return strings.Contains(g.logs.String(), "hedge not started") })
				if !strings.Contains(g.logs.String(), tc.reason) {
					t.Fatalf("no %q in the logs:\n%s", tc.reason, g.logs.String())
				}
			}
			a.free()
			ans := recv(t, ch)
			if ans.Status != 200 || ans.Body != a.want() {
				t.Fatalf("answer %d %q, want a's", ans.Status, ans.Body)
			}
			if b.calls.Load() != 0 || counter(g.Metrics.Hedge.Started, "m", "b") != 0 {
				t.Fatalf("b was sent %d requests (hedges counted: %v)", b.calls.Load(), counter(g.Metrics.Hedge.Started, "m", "b"))
			}
		})
	}
}

// TestHedgeBothFailFallsBack: the original and its hedge both fail; the
// ordinary fallback goes on to the third provider (the hedged one is not
// tried twice in the round).
func TestHedgeBothFailFallsBack(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			a, b, c := newHedgeUp(t, "a", true), newHedgeUp(t, "b", false), newHedgeUp(t, "c", false)
			a.status, b.status = 500, 502
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			g := startHedged(t, clk, []*hedgeUp{a, b, c}, "{after: 300ms}", "")
			ch := hedgeCall(t, g, context.Background(), stream)
			waitFor(t, func() bool { return a.calls.Load() == 1 })
			advanceUntil(t, clk, 300*time.Millisecond, func() bool { return b.calls.Load() == 1 })
			if c.calls.Load() != 0 {
				t.Fatal("fell back while the original was still running")
			}
			a.free()
			ans := recv(t, ch)
			if ans.Status != 200 || ans.Body != c.want() {
				t.Fatalf("answer %d %q, want c's", ans.Status, ans.Body)
			}
			if a.calls.Load() != 1 || b.calls.Load() != 1 || c.calls.Load() != 1 {
				t.Fatalf("calls a=%d b=%d c=%d, want one each", a.calls.Load(), b.calls.Load(), c.calls.Load())
			}
		})
	}
}

// TestHedgeClientDisconnectCancelsBoth: a client that leaves mid-hedge
// cancels both upstream requests.
func TestHedgeClientDisconnectCancelsBoth(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			a, b := newHedgeUp(t, "a", true), newHedgeUp(t, "b", true)
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			g := startHedged(t, clk, []*hedgeUp{a, b}, "{after: 300ms}", "")
			ctx, cancel := context.WithCancel(context.Background())
			ch := hedgeCall(t, g, ctx, stream)
			waitFor(t, func() bool { return a.calls.Load() == 1 })
			advanceUntil(t, clk, 300*time.Millisecond, func() bool { return b.calls.Load() == 1 })
			cancel()
			waitFor(t, func() bool { return a.canceled.Load() == 1 && b.canceled.Load() == 1 })
			recv(t, ch)
		})
	}
}

// TestHedgedStreamsRelayOneProvider: 1,000 concurrent hedged streams over
// two providers with jittered first tokens, so that races are won both
// ways and often close: each client gets exactly one provider's bytes,
// whole, and the header names that provider.
func TestHedgedStreamsRelayOneProvider(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	a, b := newHedgeUp(t, "a", false), newHedgeUp(t, "b", false)
	jitter := func() time.Duration { return time.Duration(time.Now().UnixNano()%6) * time.Millisecond }
	a.delay, b.delay = jitter, jitter
	g := startHedged(t, nil, []*hedgeUp{a, b}, "{after: 2ms}", "limits: {max_concurrency: 5000}\n")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}, Timeout: 60 * time.Second}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	var byA, byB atomic.Int64
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
			if err != nil {
				t.Error(err)
				return
			}
			by := resp.Header.Get("X-Switchboard-Provider")
			text := streamText(readStream(t, resp))
			switch {
			case by == "a" && text == a.want():
				byA.Add(1)
			case by == "b" && text == b.want():
				byB.Add(1)
			default:
				t.Errorf("status %d by %q got %q: not exactly one provider's stream", resp.StatusCode, by, text)
			}
		}()
	}
	wg.Wait()
	g.proxy.WaitHedges()
	h := g.Metrics.Hedge
	started := counter(h.Started, "m", "b")
	won := counter(h.Won, "m", "a", "original") + counter(h.Won, "m", "b", "hedge")
	t.Logf("%d streams: a %d, b %d; hedges started %v, decided %v", n, byA.Load(), byB.Load(), started, won)
	if byA.Load()+byB.Load() != int64(n) || started == 0 || byB.Load() == 0 {
		t.Fatalf("a %d + b %d != %d, or no hedge won (started %v)", byA.Load(), byB.Load(), n, started)
	}
}

// TestHedgedBudgetStaysHard: hedges reserve next to their originals and
// losers are charged what they are known to have cost, within their
// reservations, so concurrent hedged requests never take a tenant past its
// cap.
func TestHedgedBudgetStaysHard(t *testing.T) {
	a, b := newHedgeUp(t, "a", false), newHedgeUp(t, "b", false)
	jitter := func() time.Duration { return time.Duration(time.Now().UnixNano()%4) * time.Millisecond }
	a.delay, b.delay = jitter, jitter
	extra := "pricing:\n  a: {a-model: {input: 1000, output: 1000, context: 1000, max_output: 100}}\n" +
		"  b: {b-model: {input: 1000, output: 1000, context: 1000, max_output: 100}}\n" +
		"auth: {keys: {k: {tenant: acme, budget_usd: 3}}}\n"
	g := startHedged(t, nil, []*hedgeUp{a, b}, "{after: 1ms}", extra)
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := 0; i < 120; i++ {
		wg.Add(1)
		go func(stream bool) {
			defer wg.Done()
			ans := recv(t, hedgeCall(t, g, context.Background(), stream, "x-api-key", "k"))
			switch code := gjson.Get(ans.Body, "error.code").String(); {
			case ans.Status == 200:
				ok.Add(1)
			case ans.Status == 429 && code == "budget_exceeded", ans.Status == 400 && code == "request_exceeds_budget":
			default:
				t.Errorf("unexpected %d %s", ans.Status, ans.Body)
			}
		}(i%2 == 0)
	}
	wg.Wait()
	g.proxy.WaitHedges()
	u := g.get("/v1/usage", "x-api-key", "k")
	settled := gjson.Get(u.Body, "spend.settled_usd").Float()
	reserved := gjson.Get(u.Body, "spend.reserved_usd").Float()
	started := counter(g.Metrics.Hedge.Started, "m", "b")
	t.Logf("ok %d, hedges %v, settled %v reserved %v", ok.Load(), started, settled, reserved)
	if ok.Load() == 0 || started == 0 || settled+reserved > 3.0000001 {
		t.Fatalf("ok %d hedges %v settled %v reserved %v: %s", ok.Load(), started, settled, reserved, u.Body)
	}
	// A decided race's loser costs what it settled or is known to have
	// cost; that is counted as waste and is part of the spend. A loser
	// canceled before its request went out is refunded and costs nothing
	// (on a loaded machine every loser can be one), so waste is bounded,
	// not required.
	h := g.Metrics.Hedge
	won := counter(h.Won, "m", "a", "original") + counter(h.Won, "m", "b", "hedge")
	wasted := counter(h.WastedNanoUSD, "m", "a") + counter(h.WastedNanoUSD, "m", "b")
	if wasted < 0 || wasted > (settled+reserved)*1e9*1.01 {
		t.Fatalf("%v races decided, wasted %v nano-USD of %v USD spent or held", won, wasted, settled+reserved)
	}
}

// TestNoHedgeOnceUnaryAnswerBegins: a unary original that has sent its
// status line is answering, however slow its body: no hedge starts.
func TestNoHedgeOnceUnaryAnswerBegins(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int64
	slowBody := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"slow body"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(slowBody.Close)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	a := &hedgeUp{name: "a", srv: slowBody}
	b := newHedgeUp(t, "b", false)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	g := startHedged(t, clk, []*hedgeUp{a, b}, "{after: 300ms}", "")
	t.Cleanup(free)
	base := clk.Waiters()
	ch := hedgeCall(t, g, context.Background(), false)
	// Armed: the deadline watcher and the hedge timer; the status line
	// then stops the hedge timer.
	waitFor(t, func() bool { return calls.Load() == 1 && clk.Waiters() == base+1 })
	clk.Advance(time.Minute)
	free()
	if ans := recv(t, ch); ans.Status != 200 || ans.Body != "slow body" || b.calls.Load() != 0 {
		t.Fatalf("answer %d %q, b called %d times", ans.Status, ans.Body, b.calls.Load())
	}
}

// TestHedgeMaxExtra: with max_extra 2 a second hedge starts one delay
// after the first; the third provider wins and both others are canceled.
func TestHedgeMaxExtra(t *testing.T) {
	a, b, c := newHedgeUp(t, "a", true), newHedgeUp(t, "b", true), newHedgeUp(t, "c", true)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	g := startHedged(t, clk, []*hedgeUp{a, b, c}, "{after: 300ms, max_extra: 2}", "")
	base := clk.Waiters()
	ch := hedgeCall(t, g, context.Background(), true)
	// Each step advances once, when its timer is armed: the original's
	// deadline watcher and the hedge timer, then the first hedge's watcher
	// and the second hedge timer.
	waitFor(t, func() bool { return a.calls.Load() == 1 && clk.Waiters() == base+2 })
	clk.Advance(300 * time.Millisecond)
	waitFor(t, func() bool { return b.calls.Load() == 1 && clk.Waiters() == base+3 })
	if c.calls.Load() != 0 {
		t.Fatal("second hedge with the first")
	}
	clk.Advance(300 * time.Millisecond)
	waitFor(t, func() bool { return c.calls.Load() == 1 })
	c.free()
	if ans := recv(t, ch); ans.Body != c.want() {
		t.Fatalf("answer %q, want c's", ans.Body)
	}
	waitFor(t, func() bool { return a.canceled.Load() == 1 && b.canceled.Load() == 1 })
	g.proxy.WaitHedges()
	h := g.Metrics.Hedge
	if counter(h.Started, "m", "b") != 1 || counter(h.Started, "m", "c") != 1 || counter(h.Won, "m", "c", "hedge") != 1 {
		t.Fatalf("started b %v c %v, won by c %v", counter(h.Started, "m", "b"), counter(h.Started, "m", "c"), counter(h.Won, "m", "c", "hedge"))
	}
}
