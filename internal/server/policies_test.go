package server

import (
	"bufio"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/provider/mock"
)

// servedBy posts body n times and counts the providers that answered.
func servedBy(t *testing.T, g *gateway, body string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		a := g.post("/v1/chat/completions", body)
		if a.Status != 200 {
			t.Fatalf("status %d: %s", a.Status, a.Body)
		}
		got[a.Header.Get("X-Switchboard-Provider")]++
	}
	return got
}

// weighted 3:1 through the server: over 400 requests the heavy provider
// serves about three quarters (seeded draw, so the run is repeatable), and
// the weight-0 spare never serves while the others answer.
func TestRoutingWeightedSplit(t *testing.T) {
	g := startGateway(t, `providers:
  heavy: {type: mock, mock: {tokens: 3}}
  light: {type: mock, mock: {tokens: 3}}
  spare: {type: mock, mock: {tokens: 3}}
models:
  - name: m
    routing: weighted
    providers:
      - {provider: light, weight: 1}
      - {provider: heavy, weight: 3}
      - {provider: spare, weight: 0}
`)
	g.selector.Rand = rand.New(rand.NewPCG(7, 19)).Float64
	const n = 400
	got := servedBy(t, g, chatBody, n)
	// Expected 300; the standard deviation is sqrt(400·0.75·0.25) ≈ 8.7.
	if got["heavy"] < 300-45 || got["heavy"] > 300+45 || got["heavy"]+got["light"] != n {
		t.Fatalf("served %v, want heavy ≈ 300 of %d and light the rest", got, n)
	}
	d := g.get("/v1/health/detail")
	if r := gjson.Get(d.Body, "providers.m.routing").String(); r != "weighted" {
		t.Errorf("health detail routing = %q, want weighted", r)
	}
	if p := gjson.Get(d.Body, "providers.m.preferred_provider").String(); p != "heavy" {
		t.Errorf("preferred = %q, want heavy (the largest weight)", p)
	}
	dash := g.get("/dashboard/data")
	if r := gjson.Get(dash.Body, `models.#(name=="m").routing`).String(); r != "weighted" {
		t.Errorf("dashboard routing = %q, want weighted: %s", r, dash.Body)
	}
}

// least_busy: while a slow stream holds the primary, requests go to the
// idle provider; once the stream ends, the primary serves again.
func TestRoutingLeastBusyAvoidsHeldProvider(t *testing.T) {
	g := startGateway(t, `providers:
  a: {type: mock, mock: {tokens: 200, tokens_per_second: 4}}
  b: {type: mock, mock: {tokens: 3}}
models:
  - name: m
    routing: least_busy
    providers: [{provider: a}, {provider: b}]
`)
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(streamBody))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if by := resp.Header.Get("X-Switchboard-Provider"); by != "a" {
		t.Fatalf("the first stream went to %q, want a (idle tie: config order)", by)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
	}
	if got := servedBy(t, g, chatBody, 5); got["b"] != 5 {
		t.Fatalf("with a holding a stream, served %v; want all by b", got)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for g.selector.Busy.InFlight("a") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned stream still counts as in flight")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Unary answers of a are paced too: ask for one token.
	if got := servedBy(t, g, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`, 1); got["a"] != 1 {
		t.Fatalf("after the stream ended, served %v; want a again", got)
	}
}

// lowest_cost: the provider whose catalog price is lowest for the request
// serves, though it is neither first nor primary; an unpriced one is last;
// a failing cheap one falls through to the next cheapest.
func TestRoutingLowestCost(t *testing.T) {
	g := startGateway(t, `providers:
  dear: {type: mock, mock: {tokens: 3}}
  unknown: {type: mock, mock: {tokens: 3}}
  cheap: {type: mock, mock: {tokens: 3}}
models:
  - name: m
    routing: lowest_cost
    providers:
      - {provider: dear, model: dear-model, primary: true}
      - {provider: unknown, model: unknown-model}
      - {provider: cheap, model: cheap-model}
pricing:
  dear: {dear-model: {input: 10, output: 30}}
  cheap: {cheap-model: {input: 0.1, output: 0.4}}
retries: {max_attempts: 1, max_rounds: 1}
performance: {probe_interval: 100000} # a background probe must not take cheap's scripted fault
`)
	if got := servedBy(t, g, chatBody, 3); got["cheap"] != 3 {
		t.Fatalf("served %v, want cheap", got)
	}
	g.mock("cheap").Script(mock.Fault{Status: 503})
	if got := servedBy(t, g, chatBody, 1); got["dear"] != 1 {
		t.Fatalf("with cheap failing, served %v; want dear (priced) before unknown", got)
	}
	d := g.get("/v1/health/detail")
	if p := gjson.Get(d.Body, "providers.m.preferred_provider").String(); p != "cheap" {
		t.Errorf("preferred = %q, want cheap", p)
	}
}

// lowest_latency: once probes have measured both, the provider with the
// lower time to first token serves, though the other is the primary.
func TestRoutingLowestLatency(t *testing.T) {
	g := startGateway(t, `providers:
  slow: {type: mock, mock: {tokens: 3, ttft_ms: 120}}
  quick: {type: mock, mock: {tokens: 3, ttft_ms: 2}}
models:
  - name: m
    routing: lowest_latency
    providers: [{provider: slow}, {provider: quick}]
performance: {probe_interval: 1}
`)
	if by := stream(t, g); by != "slow" {
		t.Fatalf("unmeasured: served by %q, want slow (the primary)", by)
	}
	g.Prober.Wait() // measures quick
	stream(t, g)    // quick's second sample
	g.Prober.Wait()
	slowCalls := g.mock("slow").Calls()
	for i := range 3 {
		if by := stream(t, g); by != "quick" {
			t.Fatalf("request %d served by %q after measuring, want quick", i, by)
		}
		g.Prober.Wait()
	}
	// Probes measure the provider the policy does not use (slow), not the
	// one its traffic measures already (quick).
	if n := g.mock("slow").Calls() - slowCalls; n != 3 {
		t.Errorf("slow probed %d times over 3 requests, want 3", n)
	}
}
