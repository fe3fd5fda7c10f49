package server

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchboard/internal/inference"
	"switchboard/internal/provider/mock"
)

// fallbackYAML: model small (context 1000 tokens, one provider) falls back
// to big under the conditions on; big has a provider of its own.
func fallbackYAML(on string) string {
	return `providers:
  s1: {type: mock, mock: {tokens: 3}}
  b1: {type: mock, mock: {tokens: 3}}
models:
  - name: small
    context_length: 1000
    providers: [{provider: s1, model: small-v1}]
    fallbacks: {models: [big], on: ` + on + `}
  - name: big
    providers: [{provider: b1, model: big-v1}]
retries: {max_attempts: 1, max_rounds: 1}
`
}

const (
	smallBody       = `{"model":"small","messages":[{"role":"user","content":"hi"}]}`
	smallStreamBody = `{"model":"small","stream":true,"messages":[{"role":"user","content":"hi"}]}`
)

// Provider error bodies as the vendors send them.
var (
	openAIContext    = `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	anthropicContext = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208656 tokens > 200000 maximum"}}`
	geminiContext    = `{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`
	openAIContent    = `{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}`
	azureContent     = `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation"}}}`
	anthropicContent = `{"type":"error","error":{"type":"invalid_request_error","message":"Output blocked by content filtering policy"}}`
	openAIBadKey     = `{"error":{"message":"Incorrect API key provided: sk-proj-****abcd.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	openAIModelGone  = `{"error":{"message":"The model 'gpt-3.5-turbo-0301' has been deprecated","type":"invalid_request_error","param":null,"code":"model_not_found"}}`
	plainInvalid     = `{"error":{"message":"'messages' must contain at least one message","type":"invalid_request_error","param":"messages","code":null}}`
)

// Each condition through the real server: small's provider fails as
// scripted, and big serves (or does not, when on leaves the condition out
// or the request itself is wrong). The answer names the serving model in
// X-Switchboard-Fallback-Model; X-Switchboard-Model stays the client's.
func TestModelFallbackConditions(t *testing.T) {
	tests := []struct {
		name     string
		on       string
		fault    mock.Fault
		fallback bool
		status   int // of a refusal without fallback
	}{
		{"error: 503", "[error]", mock.Fault{Status: 503}, true, 0},
		{"error: connection failure", "[error]", mock.Fault{Transport: true}, true, 0},
		{"error: the provider's key refused (401)", "[error]", mock.Fault{Status: 401, Body: []byte(openAIBadKey)}, true, 0},
		{"error: the provider's model gone (404)", "[error]", mock.Fault{Status: 404, Body: []byte(openAIModelGone)}, true, 0},
		{"context_window: OpenAI context_length_exceeded", "[context_window]", mock.Fault{Status: 400, Body: []byte(openAIContext)}, true, 0},
		{"context_window: Anthropic prompt is too long", "[context_window]", mock.Fault{Status: 400, Body: []byte(anthropicContext)}, true, 0},
		{"context_window: Gemini input token count", "[context_window]", mock.Fault{Status: 400, Body: []byte(geminiContext)}, true, 0},
		{"content_policy: OpenAI", "[content_policy]", mock.Fault{Status: 400, Body: []byte(openAIContent)}, true, 0},
		{"content_policy: Azure content_filter", "[content_policy]", mock.Fault{Status: 400, Body: []byte(azureContent)}, true, 0},
		{"content_policy: Anthropic", "[content_policy]", mock.Fault{Status: 400, Body: []byte(anthropicContent)}, true, 0},
		{"rate_limit: 429", "[rate_limit]", mock.Fault{Status: 429, Header: hdr("Retry-After", "30")}, true, 0},
		{"default on covers every condition", "[error, context_window, content_policy, rate_limit]", mock.Fault{Status: 429}, true, 0},
		{"a condition left out of on: no fallback", "[context_window]", mock.Fault{Status: 503}, false, 503},
		{"a 429 is not an error condition", "[error]", mock.Fault{Status: 429}, false, 429},
		{"an invalid request is not retried on another model", "[error, context_window, content_policy, rate_limit]", mock.Fault{Status: 400, Body: []byte(plainInvalid)}, false, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startGateway(t, fallbackYAML(tt.on))
			g.mock("s1").Script(tt.fault)
			a := g.post("/v1/chat/completions", smallBody)
			if !tt.fallback {
				if a.Status != tt.status || g.mock("b1").Calls() != 0 || a.Header.Get(inference.FallbackModelHeader) != "" {
					t.Fatalf("want %d from small without fallback, got %d (big called %d times): %s", tt.status, a.Status, g.mock("b1").Calls(), a.Body)
				}
				return
			}
			if a.Status != 200 {
				t.Fatalf("status %d: %s", a.Status, a.Body)
			}
			if got := []string{a.Header.Get("X-Switchboard-Model"), a.Header.Get(inference.FallbackModelHeader), a.Header.Get("X-Switchboard-Provider"),
				gjson.Get(a.Body, "model").String()}; strings.Join(got, " ") != "small big b1 big-v1" {
				t.Fatalf("model, fallback model, provider, answer model = %q; want small big b1 big-v1", got)
			}
			if !strings.Contains(g.logs.String(), "model fallback") {
				t.Error("no model fallback log line")
			}
		})
	}
}

// A prompt estimated beyond small's context_length goes straight to big:
// small's provider is never called (nor billed).
func TestModelFallbackContextWindowBeforeSending(t *testing.T) {
	g := startGateway(t, fallbackYAML("[context_window]"))
	long := `{"model":"small","messages":[{"role":"user","content":"` + strings.Repeat("word ", 1200) + `"}]}`
	a := g.post("/v1/chat/completions", long)
	if a.Status != 200 || a.Header.Get(inference.FallbackModelHeader) != "big" {
		t.Fatalf("status %d, fallback %q: %s", a.Status, a.Header.Get(inference.FallbackModelHeader), a.Body)
	}
	if n := g.mock("s1").Calls(); n != 0 {
		t.Fatalf("small's provider was called %d times for a prompt over its window", n)
	}
	// A stated max_tokens counts too: 900 prompt-free tokens fit, 2000 do not.
	a = g.post("/v1/chat/completions", `{"model":"small","max_tokens":2000,"messages":[{"role":"user","content":"hi"}]}`)
	if a.Header.Get(inference.FallbackModelHeader) != "big" || g.mock("s1").Calls() != 0 {
		t.Fatalf("max_tokens beyond the window: fallback %q, small called %d", a.Header.Get(inference.FallbackModelHeader), g.mock("s1").Calls())
	}
	// The largest max_tokens JSON allows does not wrap the sum around.
	a = g.post("/v1/chat/completions", `{"model":"small","max_tokens":9223372036854775807,"messages":[{"role":"user","content":"hi"}]}`)
	if a.Header.Get(inference.FallbackModelHeader) != "big" || g.mock("s1").Calls() != 0 {
		t.Fatalf("max_tokens 2^63-1: fallback %q, small called %d", a.Header.Get(inference.FallbackModelHeader), g.mock("s1").Calls())
	}
	a = g.post("/v1/chat/completions", smallBody)
	if a.Header.Get(inference.FallbackModelHeader) != "" || a.Header.Get("X-Switchboard-Provider") != "s1" {
		t.Fatalf("a short prompt: provider %q, fallback %q", a.Header.Get("X-Switchboard-Provider"), a.Header.Get(inference.FallbackModelHeader))
	}
	m := g.get("/metrics")
	if !strings.Contains(m.Body, `switchboard_model_fallbacks_total{condition="context_window",fallback="big",model="small"} 3`) {
		t.Errorf("fallback metric missing:\n%s", grep(m.Body, "fallbacks"))
	}
}

// Without a fallback that covers context_window, an over-long prompt is
// still sent: the estimate is a heuristic, the provider decides.
func TestModelOverContextWithoutFallbackIsSent(t *testing.T) {
	g := startGateway(t, fallbackYAML("[error]"))
	long := `{"model":"small","messages":[{"role":"user","content":"` + strings.Repeat("word ", 1200) + `"}]}`
	if a := g.post("/v1/chat/completions", long); a.Status != 200 || a.Header.Get("X-Switchboard-Provider") != "s1" {
		t.Fatalf("status %d provider %q", a.Status, a.Header.Get("X-Switchboard-Provider"))
	}
}

// Streams fall back before their first token: the client gets one clean
// stream from big; and the Anthropic Messages endpoint does the same.
func TestModelFallbackStreamsAndMessages(t *testing.T) {
	g := startGateway(t, fallbackYAML("[error]"))
	g.mock("s1").Script(mock.Fault{Status: 500})
	resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(smallStreamBody))
	if err != nil {
		t.Fatal(err)
	}
	lines := readStream(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get(inference.FallbackModelHeader) != "big" || len(lines) == 0 || lines[len(lines)-1] != "[DONE]" {
		t.Fatalf("status %d fallback %q stream %q", resp.StatusCode, resp.Header.Get(inference.FallbackModelHeader), lines)
	}
	for _, l := range lines {
		if strings.Contains(l, `"error"`) {
			t.Fatalf("the stream shows the failure: %s", l)
		}
	}
	g.mock("s1").Script(mock.Fault{Status: 500})
	a := g.post("/v1/messages", `{"model":"small","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "anthropic-version", "2023-06-01")
	if a.Status != 200 || a.Header.Get(inference.FallbackModelHeader) != "big" || gjson.Get(a.Body, "type").String() != "message" {
		t.Fatalf("messages: %d %q %s", a.Status, a.Header.Get(inference.FallbackModelHeader), a.Body)
	}
}

// Chains follow each model's own fallbacks; every model failing ends in
// one failure listing every attempt across the chain.
func TestModelFallbackChainAndFailure(t *testing.T) {
	g := startGateway(t, `providers:
  p1: {type: mock, mock: {tokens: 3}}
  p2: {type: mock, mock: {tokens: 3}}
  p3: {type: mock, mock: {tokens: 3}}
models:
  - {name: a, providers: [{provider: p1}], fallbacks: [b]}
  - {name: b, providers: [{provider: p2}], fallbacks: [c]}
  - {name: c, providers: [{provider: p3}]}
retries: {max_attempts: 1, max_rounds: 1}
`)
	g.mock("p1").Script(mock.Fault{Status: 503})
	g.mock("p2").Script(mock.Fault{Status: 502})
	a := g.post("/v1/chat/completions", `{"model":"a","messages":[{"role":"user","content":"hi"}]}`)
	if a.Status != 200 || a.Header.Get(inference.FallbackModelHeader) != "c" || a.Header.Get("X-Switchboard-Model") != "a" {
		t.Fatalf("%d fallback %q: %s", a.Status, a.Header.Get(inference.FallbackModelHeader), a.Body)
	}
	for _, p := range []string{"p1", "p2", "p3"} {
		g.mock(p).Script(mock.Fault{Status: 503})
	}
	a = g.post("/v1/chat/completions", `{"model":"a","messages":[{"role":"user","content":"hi"}]}`)
	if a.Status != 503 {
		t.Fatalf("all failing: %d %s", a.Status, a.Body)
	}
	if got := gjson.Get(a.Body, "error.detail.attempts.#.provider").String(); got != `["p1","p2","p3"]` {
		t.Fatalf("attempts %s, want p1, p2, p3: %s", got, a.Body)
	}
}

// A model's fallbacks are tried in turn once its own failure meets its
// on, whatever the one before failed with: a prompt too long for a goes
// to b and, b being down, to c. A fallback that refuses the request as
// invalid ends it (c is not called).
func TestModelFallbacksTriedInTurn(t *testing.T) {
	g := startGateway(t, `providers:
  p1: {type: mock, mock: {tokens: 3}}
  p2: {type: mock, mock: {tokens: 3}}
  p3: {type: mock, mock: {tokens: 3}}
models:
  - {name: a, providers: [{provider: p1}], fallbacks: {models: [b, c], on: [context_window]}}
  - {name: b, providers: [{provider: p2}]}
  - {name: c, providers: [{provider: p3}]}
retries: {max_attempts: 1, max_rounds: 1}
`)
	body := `{"model":"a","messages":[{"role":"user","content":"hi"}]}`
	g.mock("p1").Script(mock.Fault{Status: 400, Body: []byte(openAIContext)})
	g.mock("p2").Script(mock.Fault{Status: 503})
	a := g.post("/v1/chat/completions", body)
	if a.Status != 200 || a.Header.Get(inference.FallbackModelHeader) != "c" {
		t.Fatalf("b down: %d fallback %q: %s", a.Status, a.Header.Get(inference.FallbackModelHeader), a.Body)
	}
	m := g.get("/metrics")
	if !strings.Contains(m.Body, `switchboard_model_fallbacks_total{condition="context_window",fallback="c",model="a"} 1`) {
		t.Errorf("fallback to c not counted under a's condition:\n%s", grep(m.Body, "fallbacks"))
	}
	g.mock("p1").Script(mock.Fault{Status: 400, Body: []byte(openAIContext)})
	g.mock("p2").Script(mock.Fault{Status: 400, Body: []byte(plainInvalid)})
	a = g.post("/v1/chat/completions", body)
	if a.Status != 400 || g.mock("p3").Calls() != 1 {
		t.Fatalf("b refusing the request as invalid: %d, c called %d times (want 1, the first request): %s", a.Status, g.mock("p3").Calls(), a.Body)
	}
}

// The fallback model is admitted for its own price: under a budget, a
// model whose provider cannot be priced is passed over (a provider-scoped
// refusal) and the priced fallback serves; the caller's own limit is not
// a reason to try another model.
func TestModelFallbackAdmission(t *testing.T) {
	g := startGateway(t, `providers:
  free: {type: mock, mock: {tokens: 3}}
  paid: {type: mock, mock: {tokens: 3}}
models:
  - {name: small, providers: [{provider: free, model: unpriced}], fallbacks: [big]}
  - {name: big, providers: [{provider: paid, model: priced}]}
pricing:
  paid:
    priced: {input: 1, output: 1, context: 100000, max_output: 100}
retries: {max_attempts: 1, max_rounds: 1}
auth:
  keys:
    k: {tenant: acme, budget_usd: 1}
    limited: {tenant: slow, rpm: 0}
`)
	a := g.post("/v1/chat/completions", smallBody, "Authorization", "Bearer k")
	if a.Status != 200 || a.Header.Get(inference.FallbackModelHeader) != "big" || g.mock("free").Calls() != 0 {
		t.Fatalf("%d fallback %q (unpriced called %d): %s", a.Status, a.Header.Get(inference.FallbackModelHeader), g.mock("free").Calls(), a.Body)
	}
	if c := gjson.Get(a.Body, "usage.cost_usd"); c.Type != gjson.Number || c.Float() <= 0 {
		t.Errorf("the fallback's answer is not priced: %s", a.Body)
	}
	a = g.post("/v1/chat/completions", smallBody, "Authorization", "Bearer limited")
	if a.Status != 429 || g.mock("paid").Calls() != 1 {
		t.Fatalf("the caller's own limit: %d, big called %d: %s", a.Status, g.mock("paid").Calls(), a.Body)
	}
}

// A key limited to some models falls back only among them: with big
// outside its list, small's failure is the answer (big is never called),
// and an over-long prompt is sent to small rather than skipped.
func TestModelFallbackOnlyToModelsTheKeyMayUse(t *testing.T) {
	g := startGateway(t, fallbackYAML("[error, context_window]")+`auth:
  keys:
    sk-ops: {tenant: ops, role: admin}
`)
	a := g.adminCall("POST", "/admin/v1/keys", `{"name":"ci","tenant":"ops","models":["small"]}`)
	secret := gjson.Get(a.Body, "secret").String()
	if a.Status != 201 || secret == "" {
		t.Fatalf("issue a key: %d %s", a.Status, a.Body)
	}
	g.mock("s1").Script(mock.Fault{Status: 503})
	a = g.post("/v1/chat/completions", smallBody, "Authorization", "Bearer "+secret)
	if a.Status != 503 || g.mock("b1").Calls() != 0 {
		t.Fatalf("limited key: %d, big called %d: %s", a.Status, g.mock("b1").Calls(), a.Body)
	}
	long := `{"model":"small","messages":[{"role":"user","content":"` + strings.Repeat("word ", 1200) + `"}]}`
	if a = g.post("/v1/chat/completions", long, "Authorization", "Bearer "+secret); a.Status != 200 || a.Header.Get("X-Switchboard-Provider") != "s1" {
		t.Fatalf("over-long prompt of a limited key: %d provider %q", a.Status, a.Header.Get("X-Switchboard-Provider"))
	}
	// The operator's key may use big: the same failure falls back.
	g.mock("s1").Script(mock.Fault{Status: 503})
	if a = g.post("/v1/chat/completions", smallBody, "Authorization", "Bearer sk-ops"); a.Header.Get(inference.FallbackModelHeader) != "big" {
		t.Fatalf("admin key: %d fallback %q", a.Status, a.Header.Get(inference.FallbackModelHeader))
	}
}

// A reload that would make a fallback cycle is refused with the cycle
// named, and the running config (and its fallbacks) keeps serving; a
// valid reload changes the routing policy at once.
func TestReloadRefusesFallbackCycle(t *testing.T) {
	g := startGateway(t, fallbackYAML("[error]"))
	path := filepath.Join(t.TempDir(), "c.yaml")
	cyclic := strings.Replace(fallbackYAML("[error]"), "  - name: big\n", "  - name: big\n    fallbacks: [small]\n", 1)
	os.WriteFile(path, []byte(cyclic), 0o644)
	if _, err := g.Reload(path, false); err == nil || !strings.Contains(err.Error(), "fallback cycle small -> big -> small") {
		t.Fatalf("reload of a cycle: %v", err)
	}
	g.mock("s1").Script(mock.Fault{Status: 503})
	if a := g.post("/v1/chat/completions", smallBody); a.Header.Get(inference.FallbackModelHeader) != "big" {
		t.Fatalf("after the refused reload: %d fallback %q", a.Status, a.Header.Get(inference.FallbackModelHeader))
	}
	os.WriteFile(path, []byte(strings.Replace(fallbackYAML("[error]"), "  - name: big\n", "  - name: big\n    routing: least_busy\n", 1)), 0o644)
	if _, err := g.Reload(path, false); err != nil {
		t.Fatal(err)
	}
	if r := gjson.Get(g.get("/v1/health/detail").Body, "providers.big.routing").String(); r != "least_busy" {
		t.Fatalf("routing after reload = %q", r)
	}
	if m := g.get("/v1/models/small").Body; gjson.Get(m, "routing").String() != "measured" || gjson.Get(m, "fallbacks").String() != `["big"]` {
		t.Fatalf("/v1/models/small for the operator: %s", m)
	}
}

// With the default retries (three rounds), a model whose providers are
// all paused by a 429 hands over to its rate_limit fallback at once
// instead of waiting for the stated reset (an hour here), and sends
// nothing more to the paused provider while the fallback can serve; when
// the fallback fails too, the answer names the paused provider.
func TestModelFallbackRateLimitDoesNotWaitForReset(t *testing.T) {
	g := startGateway(t, strings.Replace(fallbackYAML("[rate_limit]"), "retries: {max_attempts: 1, max_rounds: 1}\n", "", 1))
	g.mock("s1").Script(mock.Fault{Status: 429, Header: hdr("Retry-After", "3600")}, mock.Fault{Status: 429, Header: hdr("Retry-After", "3600")})
	for i := range 3 { // the second and third find s1 already paused
		if a := g.post("/v1/chat/completions", smallBody); a.Status != 200 || a.Header.Get(inference.FallbackModelHeader) != "big" {
			t.Fatalf("request %d: %d fallback %q: %s", i, a.Status, a.Header.Get(inference.FallbackModelHeader), a.Body)
		}
	}
	if n := g.mock("s1").Calls(); n != 1 {
		t.Errorf("s1 called %d times, want 1 (paused after the first; big takes the rest)", n)
	}
	g = startGateway(t, fallbackYAML("[rate_limit]"))
	g.mock("s1").Script(mock.Fault{Status: 429, Header: hdr("Retry-After", "3600")})
	g.post("/v1/chat/completions", smallBody)
	g.mock("b1").Script(mock.Fault{Status: 500})
	a := g.post("/v1/chat/completions", smallBody)
	if msg := gjson.Get(a.Body, "error.message").String(); a.Status != 500 || msg != "All providers failed: s1: paused; b1: server_error (status=500)" {
		t.Errorf("both models failing: %d %s", a.Status, a.Body)
	}
	if n := g.mock("s1").Calls(); n != 1 {
		t.Errorf("s1 called %d times, want 1", n)
	}
}

// Vendors' own refusals through the translating providers, from real HTTP
// upstreams: an Anthropic "prompt is too long" 400 and a Gemini answer
// whose prompt was blocked for safety each hand the request to the
// fallback model, unary and streamed.
func TestModelFallbackFromTranslatedVendors(t *testing.T) {
	anth := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208656 tokens > 200000 maximum"}}`))
	})
	const blocked = `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":5,"totalTokenCount":5}}`
	gem := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(r.URL.Path, "streamGenerateContent") {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("data: " + blocked + "\r\n\r\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(blocked))
	})
	g := startGateway(t, `providers:
  an: {type: anthropic, base_url: `+anth.URL+`/v1, api_key: up-key}
  ge: {type: gemini, base_url: `+gem.URL+`/v1beta, api_key: up-key}
  sim: {type: mock, mock: {tokens: 3}}
models:
  - {name: claude, providers: [{provider: an, model: claude-x}], fallbacks: {models: [spare], on: [context_window]}}
  - {name: gemini, providers: [{provider: ge, model: gemini-x}], fallbacks: {models: [spare], on: [content_policy]}}
  - {name: spare, providers: [{provider: sim, model: spare-1}]}
retries: {max_attempts: 1, max_rounds: 1}
`)
	for _, model := range []string{"claude", "gemini"} {
		for _, stream := range []bool{false, true} {
			body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
			if stream {
				body = `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			}
			a := g.post("/v1/chat/completions", body)
			if a.Status != 200 || a.Header.Get(inference.FallbackModelHeader) != "spare" || a.Header.Get("X-Switchboard-Model") != model {
				t.Errorf("%s stream=%v: %d fallback %q: %s", model, stream, a.Status, a.Header.Get(inference.FallbackModelHeader), a.Body)
			}
		}
	}
	if len(anth.bodies) != 2 || len(gem.bodies) != 2 {
		t.Errorf("upstream calls: anthropic %d, gemini %d; want 2 each", len(anth.bodies), len(gem.bodies))
	}
}

// A provider that cannot serve the endpoint (Anthropic for
// /v1/completions) is neither a fallback nor an attempt: the real failure
// of the others is the answer (a 503 passed through), not its
// unsupported_endpoint 400. Alone, it still answers for itself.
func TestFallbackSkipsProvidersWithoutTheEndpoint(t *testing.T) {
	g := startGateway(t, `providers:
  s1: {type: mock, mock: {tokens: 3}}
  claude: {type: anthropic, base_url: "http://127.0.0.1:9/v1", api_key: k}
models:
  - {name: a, providers: [{provider: s1}], fallbacks: [c]}
  - {name: m, providers: [{provider: s1}, {provider: claude}]}
  - {name: c, providers: [{provider: claude}]}
retries: {max_attempts: 1, max_rounds: 1}
`)
	for _, model := range []string{"a", "m"} {
		g.mock("s1").Script(mock.Fault{Status: 503})
		a := g.post("/v1/completions", `{"model":"`+model+`","prompt":"hi"}`)
		if a.Status != 503 || a.Header.Get(inference.FallbackModelHeader) != "" || strings.Contains(a.Body, "unsupported_endpoint") {
			t.Errorf("model %s: %d fallback %q: %s", model, a.Status, a.Header.Get(inference.FallbackModelHeader), a.Body)
		}
	}
	a := g.post("/v1/completions", `{"model":"c","prompt":"hi"}`)
	if a.Status != 400 || gjson.Get(a.Body, "error.code").String() != "unsupported_endpoint" {
		t.Errorf("an Anthropic-only model on /v1/completions: %d %s", a.Status, a.Body)
	}
	if a := g.post("/v1/chat/completions", `{"model":"a","messages":[{"role":"user","content":"hi"}]}`); a.Status != 200 {
		t.Errorf("chat on a: %d %s", a.Status, a.Body)
	}
}

// When a provider serves two models of a chain and everything fails, each
// attempt of the all-failed answer names the model it was for, in the
// OpenAI and the Anthropic error shapes alike; the message and the other
// attempt fields are unchanged.
func TestModelFallbackFailureNamesEachAttemptsModel(t *testing.T) {
	g := startGateway(t, `providers:
  p1: {type: mock, mock: {tokens: 3}}
  p2: {type: mock, mock: {tokens: 3}}
models:
  - {name: a, providers: [{provider: p1, model: a-v1}, {provider: p2, model: a-v2}], fallbacks: [b]}
  - {name: b, providers: [{provider: p1, model: b-v1}]}
retries: {max_attempts: 1, max_rounds: 1}
`)
	const wantMsg = "All providers failed: p1: server_error (status=503); p2: server_error (status=502); p1: server_error (status=500)"
	tests := []struct {
		name, path, body string
		headers          []string
	}{
		{"openai", "/v1/chat/completions", `{"model":"a","messages":[{"role":"user","content":"hi"}]}`, nil},
		{"anthropic", "/v1/messages", `{"model":"a","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, []string{"anthropic-version", "2023-06-01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g.mock("p1").Script(mock.Fault{Status: 503}, mock.Fault{Status: 500})
			g.mock("p2").Script(mock.Fault{Status: 502})
			a := g.post(tt.path, tt.body, tt.headers...)
			if a.Status != 500 || gjson.Get(a.Body, "error.message").String() != wantMsg {
				t.Fatalf("%d %s", a.Status, a.Body)
			}
			att := gjson.Get(a.Body, "error.detail.attempts")
			if got := att.Get("#.model").String(); got != `["a","a","b"]` {
				t.Errorf("attempt models %s, want a, a, b: %s", got, a.Body)
			}
			if got := att.Get("#.provider").String(); got != `["p1","p2","p1"]` {
				t.Errorf("attempt providers %s: %s", got, a.Body)
			}
			if got := att.Get("#.status").String(); got != `[503,502,500]` {
				t.Errorf("attempt statuses %s: %s", got, a.Body)
			}
			if got := att.Get("#.reason").String(); got != `["server_error","server_error","server_error"]` {
				t.Errorf("attempt reasons %s: %s", got, a.Body)
			}
		})
	}
}
