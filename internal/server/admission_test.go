package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/provider/mock"
)

func TestConcurrencySaturationIs503WithRetryAfter(t *testing.T) {
	yaml := mockYAML("m", "a") + "limits: {max_concurrency: 1, queue_timeout: 0.1}\n"
	g := startGateway(t, yaml)
	g.mock("a").Script(mock.Fault{Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions", strings.NewReader(chatBody))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, func() bool { return g.mock("a").Calls() == 1 })
	start := time.Now()
	a := g.post("/v1/chat/completions", chatBody)
	if a.Status != 503 || a.Header.Get("Retry-After") == "" || gjson.Get(a.Body, "error.code").String() != "overloaded" {
		t.Fatalf("saturated: %d %v %s", a.Status, a.Header, a.Body)
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("refusal took %v, beyond the queue timeout", waited)
	}
	cancel() // the first client leaves; its slot frees
	<-done
	waitFor(t, func() bool { return g.post("/v1/chat/completions", chatBody).Status == 200 })
}

func TestProviderBucketAdmitsExactlyTheLimit(t *testing.T) {
	yaml := strings.Replace(mockYAML("m", "a"), "    mock: {tokens: 5}\n", "    mock: {tokens: 5}\n    rpm: 7\n", 1)
	g := startGateway(t, yaml)
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := g.post("/v1/chat/completions", chatBody)
			switch {
			case a.Status == 200:
				ok.Add(1)
			case a.Status == 429 && a.Header.Get("Retry-After") != "" && gjson.Get(a.Body, "error.code").String() == "rate_limit_exceeded":
				limited.Add(1)
			default:
				t.Errorf("unexpected %d %s", a.Status, a.Body)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 7 || limited.Load() != 193 || g.mock("a").Calls() != 7 {
		t.Fatalf("admitted %d, limited %d, upstream hits %d; want 7, 193, 7", ok.Load(), limited.Load(), g.mock("a").Calls())
	}
}

func TestExplicitZeroDeniesBeforeDispatch(t *testing.T) {
	tests := []struct{ name, extra, code string }{
		{"global rpm 0", "limits: {rpm: 0}\n", "rate_limit_exceeded"},
		{"global tpm 0", "limits: {tpm: 0}\n", "token_rate_limit_exceeded"},
		{"tenant rpm 0", "auth:\n  keys:\n    k1: {tenant: acme, rpm: 0}\n", "rate_limit_exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, mockYAML("m", "a")+tc.extra)
			a := g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer k1")
			if a.Status != 429 || gjson.Get(a.Body, "error.code").String() != tc.code || a.Header.Get("Retry-After") == "" {
				t.Fatalf("%d %s", a.Status, a.Body)
			}
			if g.mock("a").Calls() != 0 {
				t.Fatal("a denied request reached the provider")
			}
		})
	}
}

func TestTenantKeysAndAdvisoryHeaders(t *testing.T) {
	yaml := mockYAML("m", "a") + `auth:
  keys:
    sk-two: {tenant: acme, rpm: 2}
    "sha256:` + sha256hex("sk-hashed") + `": {tenant: beta}
limits: {advisory_headers: true}
`
	g := startGateway(t, yaml)
	if a := g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer nope"); a.Status != 401 {
		t.Fatalf("unknown key: %d", a.Status)
	}
	if a := g.post("/v1/chat/completions", chatBody, "x-goog-api-key", "sk-hashed"); a.Status != 200 {
		t.Fatalf("sha256 key via x-goog-api-key: %d %s", a.Status, a.Body)
	}
	var remaining []string
	for i := 0; i < 2; i++ {
		a := g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two")
		if a.Status != 200 || a.Header.Get("X-Switchboard-RateLimit-Limit") != "2" {
			t.Fatalf("request %d: %d %v", i, a.Status, a.Header)
		}
		remaining = append(remaining, a.Header.Get("X-Switchboard-RateLimit-Remaining"))
		if r, err := strconv.Atoi(a.Header.Get("X-Switchboard-RateLimit-Reset")); err != nil || r < 1 || r > 60 {
			t.Fatalf("reset %q", a.Header.Get("X-Switchboard-RateLimit-Reset"))
		}
	}
	if strings.Join(remaining, ",") != "1,0" {
		t.Fatalf("remaining = %v, want 1,0", remaining)
	}
	a := g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two")
	if a.Status != 429 || gjson.Get(a.Body, "error.code").String() != "rate_limit_exceeded" {
		t.Fatalf("third: %d %s", a.Status, a.Body)
	}
	if a.Header.Get("Retry-After") == "" || a.Header.Get("Retry-After") != a.Header.Get("X-Switchboard-RateLimit-Reset") ||
		a.Header.Get("X-Switchboard-RateLimit-Remaining") != "0" {
		t.Fatalf("refusal headers: %v", a.Header)
	}
	// The usage endpoint reads, never reserves.
	u := g.get("/v1/usage", "x-api-key", "sk-two")
	if u.Status != 200 || !gjson.Get(u.Body, "rate_limits").Exists() {
		t.Fatalf("/v1/usage: %d %s", u.Status, u.Body)
	}
	if again := g.get("/v1/usage", "x-api-key", "sk-two"); gjson.Get(again.Body, "requests_today").Int() != gjson.Get(u.Body, "requests_today").Int() {
		t.Fatalf("usage read changed counters: %s vs %s", u.Body, again.Body)
	}
}

func TestAdvisoryHeadersOffByDefault(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a")+"auth:\n  keys:\n    k: {tenant: t, rpm: 5}\n")
	a := g.post("/v1/chat/completions", chatBody, "x-api-key", "k")
	if a.Status != 200 || a.Header.Get("X-Switchboard-RateLimit-Limit") != "" {
		t.Fatalf("%d %v", a.Status, a.Header)
	}
}

// pricedYAML: one mock provider whose model has a known price: 1 USD per
// million input and output tokens, context 1000, output ceiling 100.
func pricedYAML(extra string) string {
	return `providers:
  p: {type: mock, mock: {tokens: 10}}
models:
  - name: m
    providers: [{provider: p, model: priced}]
pricing:
  p:
    priced: {input: 1000, output: 1000, context: 1000, max_output: 100}
retries: {max_attempts: 1, max_rounds: 1}
` + extra
}

func TestBudgetHoldsUnderConcurrency(t *testing.T) {
	g := startGateway(t, pricedYAML(`auth:
  keys:
    k: {tenant: acme, budget_usd: 1}
`))
	// Each request reserves at most (input bound + 100 output) tokens at
	// 1000 USD per million, i.e. well under 1 USD; 120 at once cannot all
	// fit, and no interleaving may let the total pass 1 USD.
	body := `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 120; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := g.post("/v1/chat/completions", body, "x-api-key", "k")
			switch {
			case a.Status == 200:
				ok.Add(1)
			case a.Status == 429 && gjson.Get(a.Body, "error.code").String() == "budget_exceeded",
				a.Status == 400 && gjson.Get(a.Body, "error.code").String() == "request_exceeds_budget":
				refused.Add(1) // used up, or less left than this request reserves
			default:
				t.Errorf("unexpected %d %s", a.Status, a.Body)
			}
		}()
	}
	wg.Wait()
	u := g.get("/v1/usage", "x-api-key", "k")
	settled := gjson.Get(u.Body, "spend.settled_usd").Float()
	reserved := gjson.Get(u.Body, "spend.reserved_usd").Float()
	if ok.Load() == 0 || refused.Load() == 0 || settled+reserved > 1.0000001 {
		t.Fatalf("ok %d refused %d settled %v reserved %v: %s", ok.Load(), refused.Load(), settled, reserved, u.Body)
	}
	// Settled cost is the real usage: 10 output tokens and the mock's
	// prompt count per request, at 1000 USD per million.
	if settled <= 0 {
		t.Fatalf("nothing settled: %s", u.Body)
	}
}

func TestUnpriceableUnderBudget(t *testing.T) {
	yaml := mockYAML("m", "a") + "auth:\n  keys:\n    k: {tenant: acme, budget_usd: 5}\n    lax: {tenant: lax, budget_usd: 5, budget_allow_unpriced: true}\n    ops: {tenant: ops, role: admin}\n"
	g := startGateway(t, yaml)
	a := g.post("/v1/chat/completions", chatBody, "x-api-key", "k")
	if a.Status != 400 || gjson.Get(a.Body, "error.code").String() != "unpriceable_under_budget" || gjson.Get(a.Body, "error.param").String() != "model" {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	if g.mock("a").Calls() != 0 {
		t.Fatal("unpriceable request was sent")
	}
	if a := g.post("/v1/chat/completions", chatBody, "x-api-key", "lax"); a.Status != 200 {
		t.Fatalf("allow_unpriced: %d %s", a.Status, a.Body)
	}
	if m := g.get("/metrics", "x-api-key", "ops"); !strings.Contains(m.Body, `switchboard_unpriced_under_cap_total{model="a-model",provider="a"} 1`) {
		t.Fatalf("unpriced counter:\n%s", grep(m.Body, "unpriced"))
	}
}

func TestCostUSDInUsage(t *testing.T) {
	g := startGateway(t, pricedYAML(""))
	a := g.post("/v1/chat/completions", chatBody)
	c := gjson.Get(a.Body, "usage.cost_usd")
	pt, ct := gjson.Get(a.Body, "usage.prompt_tokens").Int(), gjson.Get(a.Body, "usage.completion_tokens").Int()
	if want := float64(pt+ct) * 1000 / 1e6; c.Type != gjson.Number || c.Float() < want*0.999 || c.Float() > want*1.001 {
		t.Fatalf("cost_usd = %v, want %v: %s", c, want, a.Body)
	}
	g2 := startGateway(t, mockYAML("m", "a"))
	if c := gjson.Get(g2.post("/v1/chat/completions", chatBody).Body, "usage.cost_usd"); !c.Exists() || c.Type != gjson.Null {
		t.Fatalf("unknown model cost_usd = %v, want null", c)
	}
	// Streams: the usage chunk the client asked for carries cost too.
	resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	evs := readStream(t, resp)
	found := false
	for _, e := range evs {
		if gjson.Get(e, "usage.cost_usd").Type == gjson.Number {
			found = true
		}
	}
	if !found {
		t.Fatalf("no cost_usd in the stream: %q", evs)
	}
}

func TestMeteredStreamHidesInjectedUsage(t *testing.T) {
	g := startGateway(t, pricedYAML("auth:\n  keys:\n    k: {tenant: acme, budget_usd: 10}\n"))
	req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(streamBody))
	req.Header.Set("x-api-key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	evs := readStream(t, resp)
	for _, e := range evs {
		if gjson.Get(e, "usage").Exists() && len(gjson.Get(e, "choices").Array()) == 0 {
			t.Fatalf("client got a usage chunk it did not ask for: %s", e)
		}
	}
	u := g.get("/v1/usage", "x-api-key", "k")
	if gjson.Get(u.Body, "spend.settled_usd").Float() <= 0 || gjson.Get(u.Body, "spend.reserved_usd").Float() != 0 {
		t.Fatalf("stream not settled on its usage: %s", u.Body)
	}
}

func TestCanceledStreamKeepsReservation(t *testing.T) {
	yaml := strings.Replace(pricedYAML("auth:\n  keys:\n    k: {tenant: acme, budget_usd: 10}\n"), "mock: {tokens: 10}", "mock: {tokens: 50, tokens_per_second: 20}", 1)
	g := startGateway(t, yaml)
	req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(streamBody))
	req.Header.Set("x-api-key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	resp.Body.Read(buf)
	resp.Body.Close() // walk away mid-stream
	var u answer
	waitFor(t, func() bool {
		u = g.get("/v1/usage", "x-api-key", "k")
		return gjson.Get(u.Body, "spend.reserved_usd").Float() > 0
	})
	if gjson.Get(u.Body, "spend.settled_usd").Float() != 0 {
		t.Fatalf("abandoned stream settled: %s", u.Body)
	}
}

func TestUsageRequiresAuthAndShowsSpend(t *testing.T) {
	g := startGateway(t, pricedYAML("auth:\n  keys:\n    k: {tenant: acme, budget_usd: 2}\n"))
	if a := g.get("/v1/usage"); a.Status != 401 {
		t.Fatalf("no key: %d", a.Status)
	}
	g.post("/v1/chat/completions", chatBody, "x-api-key", "k")
	u := g.get("/v1/usage", "x-api-key", "k")
	var v map[string]any
	if err := json.Unmarshal([]byte(u.Body), &v); err != nil {
		t.Fatal(err)
	}
	if gjson.Get(u.Body, "spend.budget_usd").Float() != 2 || !gjson.Get(u.Body, "spend.remaining_usd").Exists() {
		t.Fatalf("%s", u.Body)
	}
}

// TestStreamSettlesOnProviderBill: a provider that reports its own bill in
// the stream's usage (usage.cost, USD) is charged that, not the catalog.
func TestStreamSettlesOnProviderBill(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"cost":0.25}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	yaml := upstreamYAML("up", u.URL, `auth:
  keys:
    k: {tenant: acme, budget_usd: 10}
pricing:
  up:
    upstream-model: {input: 1, output: 1, context: 1000, max_output: 100}
`)
	g := startGateway(t, yaml)
	req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("x-api-key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readStream(t, resp)
	usage := g.get("/v1/usage", "x-api-key", "k")
	if got := gjson.Get(usage.Body, "spend.settled_nano_usd").Int(); got != 250_000_000 {
		t.Fatalf("settled %d nano-USD, want the provider's 0.25 USD: %s", got, usage.Body)
	}
}
