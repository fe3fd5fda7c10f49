package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Findings of an outside tester, each through the real server.

// TestTranslatedUnaryWithoutContentFallsBack: a unary answer the gateway
// translates and that holds no answer at all (a Gemini object with no
// candidates, a chat object with no choices for a Messages client) is the
// provider's bad_response, and the next provider serves, as for a stream.
func TestTranslatedUnaryWithoutContentFallsBack(t *testing.T) {
	empty := func(body string) *upstream {
		return newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, body)
		})
	}
	ge := empty(`{"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3},"modelVersion":"gemini-up","responseId":"r1"}`)
	oa := empty(`{"id":"x","object":"chat.completion","created":1,"model":"gpt-up","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":0,"total_tokens":3}}`)
	g := startGateway(t, fmt.Sprintf(`providers:
  ge: {type: gemini, base_url: %s/v1beta, api_key: up-key}
  oa: {type: openai, base_url: %s/v1, api_key: up-key}
  mk: {type: mock, mock: {tokens: 5}}
models:
  - name: via-gemini
    providers: [{provider: ge, model: gemini-up}, {provider: mk, model: mk-model}]
  - name: via-openai
    providers: [{provider: oa, model: gpt-up}, {provider: mk, model: mk-model}]
performance: {probing_enabled: false}
retries: {max_attempts: 1, max_rounds: 1}
`, ge.URL, oa.URL))
	chatOK := func(body string) bool { return gjson.Get(body, "choices.0.message.content").String() != "" }
	messagesOK := func(body string) bool { return gjson.Get(body, "content.0.text").String() != "" }
	for _, tc := range []struct {
		name, path, model string
		up                *upstream
		served            func(string) bool
	}{
		{"gemini no candidates, chat", "/v1/chat/completions", "via-gemini", ge, chatOK},
		{"gemini no candidates, messages", "/v1/messages", "via-gemini", ge, messagesOK},
		{"openai no choices, messages", "/v1/messages", "via-openai", oa, messagesOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := requests(tc.up)
			a := g.post(tc.path, `{"model":"`+tc.model+`","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
			if requests(tc.up)-before != 1 {
				t.Fatalf("the empty-answering upstream got %d requests, want 1", requests(tc.up)-before)
			}
			if a.Status != 200 || a.Header.Get("X-Switchboard-Provider") != "mk" || !tc.served(a.Body) {
				t.Fatalf("want the next provider to serve an answer with content; got %d from %q: %s",
					a.Status, a.Header.Get("X-Switchboard-Provider"), a.Body)
			}
		})
	}
}

// TestClientTypeErrorsNameTheField: a request field of the wrong JSON type
// is refused naming the field and the JSON type expected, never Go's type
// names, with the field as param and code invalid_request, on every
// endpoint and for every provider type that decodes the body.
func TestClientTypeErrorsNameTheField(t *testing.T) {
	never := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	g := startGateway(t, fmt.Sprintf(`providers:
  an: {type: anthropic, base_url: %s/v1, api_key: up-key}
  ge: {type: gemini, base_url: %s/v1beta, api_key: up-key}
  mk: {type: mock, mock: {tokens: 5}}
models:
  - name: via-anthropic
    providers: [{provider: an, model: claude-up}]
  - name: via-gemini
    providers: [{provider: ge, model: gemini-up}]
  - name: via-mock
    providers: [{provider: mk, model: mk-model}]
performance: {probing_enabled: false}
retries: {max_attempts: 1, max_rounds: 1}
`, never.URL, never.URL))
	for _, tc := range []struct {
		name, path, body string
		param, message   string // param "" = Anthropic's shape, which has none
	}{
		{"messages not an array", "/v1/messages", `{"model":"via-mock","max_tokens":10,"messages":5}`,
			"", "messages: expected an array, got a number"},
		{"messages role not a string", "/v1/messages", `{"model":"via-mock","max_tokens":10,"messages":[{"role":7,"content":"hi"}]}`,
			"", "expected a string, got a number"},
		{"max_tokens fraction", "/v1/messages", `{"model":"via-mock","max_tokens":1.5,"messages":[]}`,
			"", "max_tokens: expected a non-negative integer, got a number (1.5)"},
		{"tools to anthropic", "/v1/chat/completions", `{"model":"via-anthropic","messages":[{"role":"user","content":"hi"}],"tools":5}`,
			"tools", "tools: expected an array, got a number"},
		{"tools to gemini", "/v1/chat/completions", `{"model":"via-gemini","messages":[{"role":"user","content":"hi"}],"tools":{"a":1}}`,
			"tools", "tools: expected an array, got an object"},
		{"messages to gemini", "/v1/chat/completions", `{"model":"via-gemini","messages":"hi"}`,
			"messages", "messages: expected an array, got a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := requests(never)
			a := g.post(tc.path, tc.body)
			msg := gjson.Get(a.Body, "error.message").String()
			if a.Status != 400 || !strings.Contains(msg, tc.message) {
				t.Fatalf("want 400 saying %q; got %d %s", tc.message, a.Status, a.Body)
			}
			for _, leak := range []string{"Go struct", "Go value", "openai.", "anthropic.", "gemini.", "[]"} {
				if strings.Contains(msg, leak) {
					t.Fatalf("message leaks the gateway's Go types (%q): %s", leak, msg)
				}
			}
			if tc.param != "" {
				if p, c := gjson.Get(a.Body, "error.param").String(), gjson.Get(a.Body, "error.code").String(); p != tc.param || c != "invalid_request" {
					t.Fatalf("param %q code %q, want %q invalid_request: %s", p, c, tc.param, a.Body)
				}
			} else if typ := gjson.Get(a.Body, "error.type").String(); typ != "invalid_request_error" {
				t.Fatalf("Anthropic error type %q: %s", typ, a.Body)
			}
			if requests(never) != before {
				t.Fatal("the refused request reached the upstream")
			}
		})
	}
	a := g.post("/v1/chat/completions", `{"model":"via-mock",`)
	if msg := gjson.Get(a.Body, "error.message").String(); a.Status != 400 || !strings.Contains(msg, "not valid JSON") || strings.Contains(msg, "json:") {
		t.Fatalf("malformed body: %d %s", a.Status, a.Body)
	}
}

// requests counts what an upstream received.
func requests(u *upstream) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.bodies)
}

// budgetYAML prices mk-model at a cheap input and a dear output (0.1 USD
// a token) under a 0.5 USD budget, so that the output side, and with it n,
// decides what fits.
func budgetYAML(priced string) string {
	return `providers:
  mk: {type: mock, mock: {tokens: 5}}
models:
  - name: m
    providers: [{provider: mk, model: mk-model}]
pricing:
  mk:
    mk-model: ` + priced + `
auth:
  keys:
    k: {tenant: acme, budget_usd: 0.5}
retries: {max_attempts: 1, max_rounds: 1}
`
}

// TestInvalidNIsRefusedBeforePricing: an n that is not an integer from 1
// to 128 is a 400 invalid_request naming n, whatever the budget; and a
// request that does not fit its budget because of n is told to lower n.
func TestInvalidNIsRefusedBeforePricing(t *testing.T) {
	g := startGateway(t, budgetYAML(`{input: 1, output: 100000, context: 100000, max_output: 100}`))
	for _, n := range []string{"9223372036854775807", "1e18", "-5", "0", "129", "2.5", `"2"`, "true"} {
		t.Run("n="+n, func(t *testing.T) {
			a := g.post("/v1/chat/completions", `{"model":"m","max_tokens":1,"n":`+n+`,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "k")
			if a.Status != 400 || gjson.Get(a.Body, "error.code").String() != "invalid_request" || gjson.Get(a.Body, "error.param").String() != "n" {
				t.Fatalf("want 400 invalid_request param n; got %d %s", a.Status, a.Body)
			}
			if msg := gjson.Get(a.Body, "error.message").String(); !strings.Contains(msg, "1 to 128") {
				t.Fatalf("message does not say what n may be: %s", msg)
			}
		})
	}
	if g.mock("mk").Calls() != 0 {
		t.Fatal("a refused request was sent")
	}

	for _, tc := range []struct {
		name, body, param string
		says              []string
	}{
		// 8 candidates of one token: 0.8 USD, and not one token for each
		// of them fits; the input alone (a fraction of a cent) does.
		{"n alone is too much", `{"model":"m","max_tokens":1,"n":8,"messages":[{"role":"user","content":"hi"}]}`, "n",
			[]string{"8 candidates (n)", "lower n"}},
		// 2 candidates of 5 tokens: 1 USD; 2 tokens each would fit.
		{"n times max_tokens", `{"model":"m","max_tokens":5,"n":2,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens",
			[]string{"2 candidates (n)", "lower n", "set max_tokens to 2 or less"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := g.post("/v1/chat/completions", tc.body, "x-api-key", "k")
			msg := gjson.Get(a.Body, "error.message").String()
			if a.Status != 400 || gjson.Get(a.Body, "error.code").String() != "request_exceeds_budget" || gjson.Get(a.Body, "error.param").String() != tc.param {
				t.Fatalf("want 400 request_exceeds_budget param %s; got %d %s", tc.param, a.Status, a.Body)
			}
			for _, want := range tc.says {
				if !strings.Contains(msg, want) {
					t.Fatalf("message lacks %q: %s", want, msg)
				}
			}
			if strings.Contains(msg, "shorten the prompt") {
				t.Fatalf("message blames the prompt: %s", msg)
			}
		})
	}
	if a := g.post("/v1/chat/completions", `{"model":"m","max_tokens":2,"n":2,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "k"); a.Status != 200 {
		t.Fatalf("the advised max_tokens was refused: %d %s", a.Status, a.Body)
	}
}

// TestZeroOutputLimitReservesTheCeiling: an output limit of 0 is not
// honoured by providers (they answer anyway), so under a budget it
// reserves the model's output ceiling like an absent one: the request
// that fits only with a zero-output reservation is refused, not admitted
// to be billed beyond what it reserved.
func TestZeroOutputLimitReservesTheCeiling(t *testing.T) {
	// Input ~0.0002 USD; the ceiling of 100 output tokens at 0.01 USD is
	// 1 USD, twice the budget.
	g := startGateway(t, budgetYAML(`{input: 1, output: 10000, context: 100000, max_output: 100}`))
	for _, field := range []string{"max_tokens", "max_completion_tokens"} {
		t.Run(field, func(t *testing.T) {
			a := g.post("/v1/chat/completions", `{"model":"m","`+field+`":0,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "k")
			if a.Status != 400 || gjson.Get(a.Body, "error.code").String() != "request_exceeds_budget" {
				t.Fatalf("want the ceiling reserved and refused; got %d %s", a.Status, a.Body)
			}
			if msg := gjson.Get(a.Body, "error.message").String(); !strings.Contains(msg, "reserves up to 1.") {
				t.Fatalf("reservation is not the ceiling: %s", msg)
			}
		})
	}
	if g.mock("mk").Calls() != 0 {
		t.Fatal("a request reserving nothing for its output was sent")
	}
	if a := g.post("/v1/chat/completions", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "k"); a.Status != 200 {
		t.Fatalf("a stated limit that fits was refused: %d %s", a.Status, a.Body)
	}
}
