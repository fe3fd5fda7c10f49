package server

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/admit"
	"switchboard/internal/config"
	"switchboard/internal/store"
	"switchboard/internal/store/redistest"
)

// Money tests (issue 24) run through the real server on each store the
// gateway can keep its ledger in: memory, a SQLite file, and a real
// redis-server.
var moneyStores = []string{"memory", "sqlite", "redis"}

// eachStore runs f once per store, as a subtest.
func eachStore(t *testing.T, f func(t *testing.T, kind string)) {
	for _, kind := range moneyStores {
		t.Run(kind, func(t *testing.T) { f(t, kind) })
	}
}

// moneyGateway serves yaml with its admission state in a store of kind.
func moneyGateway(t *testing.T, kind, yaml string) *gateway {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "money.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs, log := replicaLog(0)
	var st store.Store
	switch kind {
	case "memory":
		st = store.NewMemory()
	case "sqlite":
		st, err = store.OpenSQLite(filepath.Join(t.TempDir(), "ledger.db"))
	case "redis":
		// A long command timeout: a pipeline on a loaded machine must not
		// send budgeted admissions to the fail-closed path.
		st, err = store.OpenRedis(store.RedisOptions{URL: redistest.Start(t).URL, CommandTimeout: 10 * time.Second, Log: log})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := New(log, nil, nil)
	s.Admission = admit.New(st, s.Clock, s.Metrics.Registry)
	s.Apply(cfg)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &gateway{Server: s, URL: ts.URL, logs: logs, t: t}
}

// spendOf reads a key's spend (nano-USD): settled and held, once the
// store has applied every settlement queued before the read.
func (g *gateway) spendOf(key string) (settled, held int64) {
	g.t.Helper()
	u := g.get("/v1/usage", "Authorization", "Bearer "+key)
	if u.Status != 200 {
		g.t.Fatalf("usage %d %s", u.Status, u.Body)
	}
	return gjson.Get(u.Body, "spend.settled_nano_usd").Int(), gjson.Get(u.Body, "spend.reserved_nano_usd").Int()
}

// wire is an upstream whose answers the tests choose by the model name
// the gateway sends it (the provider entry's model):
//
//	full        usage with every counter, after the content
//	promptonly  usage without completion_tokens
//	billed      usage with the provider's own bill (usage.cost)
//	long        a unary answer of 500 completion tokens, whatever max_tokens
//	earlyusage  (stream) the usage frame first, then the content
//	runaway     (stream) 60 tokens, whatever max_tokens says
//
// It serves OpenAI chat and Responses at /v1 and Anthropic Messages at
// /v1/messages (an anthropic-type provider), counting upstream streams
// the gateway canceled.
type wire struct {
	srv      *httptest.Server
	canceled atomic.Int64
}

const (
	runawayTokens = 60
	// answerCost is what a 10 + 5 token answer costs at wireYAML's prices.
	answerCost = 10*1_000 + 5*1_000_000
)

func newWire(t *testing.T) *wire {
	w := &wire{}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.srv.Close)
	return w
}

func (u *wire) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	model := gjson.GetBytes(b, "model").String()
	stream := gjson.GetBytes(b, "stream").Bool()
	usage := `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`
	switch model {
	case "promptonly":
		usage = `{"prompt_tokens":10}`
	case "billed":
		usage = `{"prompt_tokens":10,"completion_tokens":5,"cost":0.000001}`
	case "long":
		usage = `{"prompt_tokens":10,"completion_tokens":500}`
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":%s}`, model, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(name, data string) bool {
		if name != "" {
			fmt.Fprintf(w, "event: %s\n", name)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		fl.Flush()
		select {
		case <-r.Context().Done():
			u.canceled.Add(1)
			return false
		case <-time.After(time.Millisecond):
			return true
		}
	}
	n := 3
	if model == "runaway" {
		n = runawayTokens
		usage = fmt.Sprintf(`{"prompt_tokens":10,"completion_tokens":%d}`, n)
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/messages"):
		send("message_start", `{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"`+model+
			`","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}`)
		send("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		for i := range n {
			if !send("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" t%d"}}`, i)) {
				return
			}
		}
		send("content_block_stop", `{"type":"content_block_stop","index":0}`)
		send("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":%d}}`, n))
		send("message_stop", `{"type":"message_stop"}`)
	case strings.HasSuffix(r.URL.Path, "/responses"):
		send("response.created", `{"type":"response.created","response":{"id":"r1","model":"`+model+`","status":"in_progress"}}`)
		for i := range n {
			if !send("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","delta":" t%d"}`, i)) {
				return
			}
		}
		send("response.completed", fmt.Sprintf(`{"type":"response.completed","response":{"id":"r1","status":"completed",`+
			`"usage":{"input_tokens":10,"output_tokens":%d}}}`, n))
	default:
		chunk := func(choice string) string {
			return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"` + model + `","choices":[` + choice + `]}`
		}
		if model == "earlyusage" {
			send("", `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"x","choices":[],"usage":`+usage+`}`)
		}
		for i := range n {
			if !send("", chunk(fmt.Sprintf(`{"index":0,"delta":{"content":" t%d"},"finish_reason":null}`, i))) {
				return
			}
		}
		send("", chunk(`{"index":0,"delta":{},"finish_reason":"stop"}`))
		if model != "earlyusage" {
			send("", `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"x","choices":[],"usage":`+usage+`}`)
		}
		send("", "[DONE]")
	}
}

// wireYAML routes model m to the wire's model name upstream (openai
// type), and model a to it through an anthropic-type provider, all
// priced at 1 USD per million input tokens (1,000 nano-USD a token) and
// 1000 per million output tokens (1,000,000 nano-USD a token): an answer
// of 10 + 5 tokens costs 5,010,000 nano-USD.
func wireYAML(u *wire, upstream, extra string) string {
	return fmt.Sprintf(`providers:
  w: {type: openai, base_url: %[1]s/v1, api_key: k}
  wa: {type: anthropic, base_url: %[1]s/v1, api_key: k}
models:
  - name: m
    providers: [{provider: w, model: %[2]s}]
  - name: a
    providers: [{provider: wa, model: %[2]s}]
pricing:
  w: {%[2]s: {input: 1, output: 1000, context: 100000, max_output: 100}}
  wa: {%[2]s: {input: 1, output: 1000, context: 100000, max_output: 100}}
retries: {max_attempts: 1, max_rounds: 1}
`, u.srv.URL, upstream) + extra
}

// metrics reads /metrics with the operator's key (wire configs name one:
// ops).
func (g *gateway) metrics() string {
	g.t.Helper()
	m := g.get("/metrics", "Authorization", "Bearer ops")
	if m.Status != 200 {
		g.t.Fatalf("/metrics %d %s", m.Status, m.Body)
	}
	return m.Body
}

// The ledger never fills with settled money: far more budgeted requests
// than spend.max_retained_attempts are served, concurrently, and no live
// hold is left once they are answered.
func TestLedgerNeverFillsWithSettledAttempts(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		u := newWire(t)
		g := moneyGateway(t, kind, wireYAML(u, "full", "spend: {max_retained_attempts: 8}\n"+
			"auth:\n  keys:\n    k: {tenant: acme, budget_usd: 1000}\n    ops: {tenant: ops, role: admin}\n"))
		body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
		var ok, other atomic.Int64
		var wg sync.WaitGroup
		work := make(chan int)
		for range 6 { // fewer in flight than live holds
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range work {
					if a, err := send(g.URL, body, "Authorization", "Bearer k"); err == nil && a.Status == 200 {
						ok.Add(1)
					} else if other.Add(1) == 1 {
						t.Errorf("refused: %v %d %s", err, a.Status, a.Body)
					}
				}
			}()
		}
		for i := range 300 {
			work <- i
		}
		close(work)
		wg.Wait()
		settled, held := g.spendOf("k")
		// Each answer costs its 10 + 5 tokens.
		if ok.Load() != 300 || settled != 300*answerCost || held != 0 {
			t.Fatalf("%d served, %d refused; settled %d held %d", ok.Load(), other.Load(), settled, held)
		}
		if m := g.metrics(); !strings.Contains(m, "switchboard_spend_live_holds 0") {
			t.Fatalf("live holds after the run:\n%s", grep(m, "live_holds"))
		}
	})
}

// Hundreds of concurrent requests against a budget that fits a few:
// what is settled and still held never passes the budget, and what is
// settled is exactly what was answered.
func TestBudgetNeverOvershootsUnderLoad(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		u := newWire(t)
		g := moneyGateway(t, kind, wireYAML(u, "full", "auth:\n  keys:\n    k: {tenant: acme, budget_usd: 1}\n"))
		body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
		var ok, refused atomic.Int64
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for range 300 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				a, err := send(g.URL, body, "Authorization", "Bearer k")
				code := gjson.Get(a.Body, "error.code").String()
				switch {
				case err != nil:
					t.Error(err)
				case a.Status == 200:
					ok.Add(1)
				case code == "budget_exceeded" || code == "request_exceeds_budget":
					refused.Add(1)
				default:
					t.Errorf("%d %s", a.Status, a.Body)
				}
			}()
		}
		close(gate)
		wg.Wait()
		settled, held := g.spendOf("k")
		if ok.Load() == 0 || refused.Load() == 0 || settled+held > 1e9 || settled != ok.Load()*answerCost || held != 0 {
			t.Fatalf("ok %d refused %d: settled %d + held %d of 1e9", ok.Load(), refused.Load(), settled, held)
		}
	})
}

// A hold is released only by a real bill: an answer without its output
// counter, or a stream whose usage came before its content, leaves the
// hold in place (raised by what was seen); complete usage, or a bill,
// settles it.
func TestHoldReleasedOnlyByARealBill(t *testing.T) {
	tests := []struct {
		upstream string
		stream   bool
		settled  bool // the hold was replaced by the cost
	}{
		{"full", false, true},
		{"promptonly", false, false},
		{"billed", false, true},
		{"full", true, true},
		{"promptonly", true, false},
		{"earlyusage", true, false},
	}
	eachStore(t, func(t *testing.T, kind string) {
		for _, tt := range tests {
			u := newWire(t)
			g := moneyGateway(t, kind, wireYAML(u, tt.upstream, "auth:\n  keys:\n    k: {tenant: acme, budget_usd: 10}\n"))
			body := fmt.Sprintf(`{"model":"m","max_tokens":5,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, tt.stream)
			a := g.post("/v1/chat/completions", body, "Authorization", "Bearer k")
			if a.Status != 200 {
				t.Fatalf("%s: %d %s", tt.upstream, a.Status, a.Body)
			}
			settled, held := g.spendOf("k")
			if got := held == 0 && settled > 0; got != tt.settled {
				t.Errorf("%s stream=%v: settled %d held %d; want settled=%v", tt.upstream, tt.stream, settled, held, tt.settled)
			}
		}
	})
}

// An unpriced hold (budget_allow_unpriced: the remaining balance) is
// released by a provider bill only, not by the catalog's price of the
// reported usage.
func TestUnpricedHoldReleasedOnlyByABill(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		for _, tt := range []struct {
			upstream string
			released bool
		}{{"full", false}, {"billed", true}} {
			u := newWire(t)
			// No max_output: a request without max_tokens cannot be bounded.
			yaml := strings.Replace(wireYAML(u, tt.upstream, "auth:\n  keys:\n    k: {tenant: acme, budget_usd: 10, budget_allow_unpriced: true}\n"),
				"context: 100000, max_output: 100}", "context: 100000}", 2)
			g := moneyGateway(t, kind, yaml)
			if a := g.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
				"Authorization", "Bearer k"); a.Status != 200 {
				t.Fatalf("%d %s", a.Status, a.Body)
			}
			settled, held := g.spendOf("k")
			if tt.released && (held != 0 || settled != 1000) {
				t.Errorf("%s: settled %d held %d; want the bill (1000) settled", tt.upstream, settled, held)
			}
			if !tt.released && (held != 10e9 || settled != 0) {
				t.Errorf("%s: settled %d held %d; want the whole balance still held", tt.upstream, settled, held)
			}
		}
	})
}

// sse reads a stream's events as (name, data) pairs.
func sseEvents(t *testing.T, resp *http.Response) (names, data []string) {
	t.Helper()
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
		} else if d, ok := strings.CutPrefix(line, "data: "); ok {
			names, data = append(names, name), append(data, d)
			name = ""
		}
	}
	return names, data
}

// An upstream that ignores max_tokens is held to it: 40 concurrent streams
// of max_tokens 5 against a 0.5 USD budget are each ended for the client
// after 5 tokens with its protocol's stop for length, the upstream is
// canceled, and the budget holds (followed to their end, the 60-token
// answers would have settled 2.4 USD, almost 5 times the budget). Chat,
// Responses, and Anthropic Messages both relayed natively and
// translated.
func TestStreamsHeldToTheirBound(t *testing.T) {
	clients := []struct {
		name, path, body string
		// check reads the client's stream: the content it got and
		// whether it ended for length.
		check func(names, data []string) (tokens int, length bool)
	}{
		{"chat", "/v1/chat/completions", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			func(_, data []string) (int, bool) {
				n, length := 0, false
				for _, d := range data {
					if gjson.Get(d, "choices.0.delta.content").String() != "" {
						n++
					}
					length = length || gjson.Get(d, "choices.0.finish_reason").String() == "length"
				}
				return n, length && data[len(data)-1] == "[DONE]"
			}},
		{"responses", "/v1/responses", `{"model":"m","max_output_tokens":5,"stream":true,"input":"hi"}`,
			func(names, data []string) (int, bool) {
				n := strings.Count(strings.Join(names, ","), "response.output_text.delta")
				last := data[len(data)-1]
				return n, names[len(names)-1] == "response.incomplete" &&
					gjson.Get(last, "response.incomplete_details.reason").String() == "max_output_tokens"
			}},
		{"messages native", "/v1/messages", `{"model":"a","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			messagesEnd},
		{"messages translated", "/v1/messages", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			messagesEnd},
	}
	eachStore(t, func(t *testing.T, kind string) {
		for _, c := range clients {
			t.Run(c.name, func(t *testing.T) {
				u := newWire(t)
				g := moneyGateway(t, kind, wireYAML(u, "runaway", "auth:\n  keys:\n    k: {tenant: acme, budget_usd: 0.5}\n    ops: {tenant: ops, role: admin}\n"))
				var ok, cut atomic.Int64
				var wg sync.WaitGroup
				for range 40 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						req, _ := http.NewRequest("POST", g.URL+c.path, strings.NewReader(c.body))
						req.Header.Set("Authorization", "Bearer k")
						req.Header.Set("Content-Type", "application/json")
						resp, err := fleetClient.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						if resp.StatusCode != 200 {
							b, _ := io.ReadAll(resp.Body)
							resp.Body.Close()
							// A budget refusal (Anthropic's error shape has no code).
							if code := gjson.GetBytes(b, "error.code").String(); code != "budget_exceeded" && code != "request_exceeds_budget" &&
								!strings.Contains(gjson.GetBytes(b, "error.message").String(), "budget of tenant") {
								t.Errorf("%d %s", resp.StatusCode, b)
							}
							return
						}
						ok.Add(1)
						n, length := c.check(sseEvents(t, resp))
						if n > 5 || !length {
							t.Errorf("the client got %d tokens, ended for length %v", n, length)
						} else {
							cut.Add(1)
						}
					}()
				}
				wg.Wait()
				settled, held := g.spendOf("k")
				if ok.Load() == 0 || cut.Load() != ok.Load() || settled+held > 0.5e9 {
					t.Fatalf("%d served, %d cut at 5 tokens; settled %d + held %d of 0.5e9", ok.Load(), cut.Load(), settled, held)
				}
				waitFor(t, func() bool { return u.canceled.Load() >= ok.Load() })
				if !strings.Contains(g.metrics(), `switchboard_output_over_bound_total{model="runaway",outcome="cut"`) {
					t.Error("cut streams not counted")
				}
			})
		}
	})
}

// messagesEnd reads an Anthropic stream: its text deltas, and whether it
// ended with stop_reason max_tokens and message_stop.
func messagesEnd(names, data []string) (int, bool) {
	n, stop := 0, ""
	for i, d := range data {
		switch names[i] {
		case "content_block_delta":
			n++
		case "message_delta":
			stop = gjson.Get(d, "delta.stop_reason").String()
		}
	}
	return n, stop == "max_tokens" && names[len(names)-1] == "message_stop"
}

// A unary answer past its bound is charged in full, counted and logged.
func TestUnaryPastItsBoundChargedInFull(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		u := newWire(t)
		g := moneyGateway(t, kind, wireYAML(u, "long", "auth:\n  keys:\n    k: {tenant: acme, budget_usd: 10}\n    ops: {tenant: ops, role: admin}\n"))
		if a := g.post("/v1/chat/completions", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer k"); a.Status != 200 {
			t.Fatalf("%d %s", a.Status, a.Body)
		}
		if settled, held := g.spendOf("k"); settled != 10*1_000+500*1_000_000 || held != 0 {
			t.Fatalf("settled %d held %d, want the 510 tokens in full", settled, held)
		}
		if !strings.Contains(g.metrics(), `switchboard_output_over_bound_total{model="long",outcome="charged",provider="w"} 1`) {
			t.Error("not counted")
		}
		if !strings.Contains(g.logs.String(), "passed its bound: charged in full") {
			t.Error("not logged")
		}
	})
}
