package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// goUpstream is a self-hosted server that decodes requests as Go's
// encoding/json does (case-insensitively, as Ollama and LocalAI do) and
// reports the model and max_tokens it decoded.
func goUpstream(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	u := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"max %d"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`,
			req.Model, req.MaxTokens)
	}))
	t.Cleanup(u.Close)
	return u, &calls
}

// Issue 27, item 1: a key differing only by case from a field the gateway
// reads is refused (400 naming it) on every endpoint of every inbound
// protocol, before any upstream sees it. Before, {"model": "chat",
// "MODEL": "big-model", "Max_Tokens": 500000} reached a Go upstream as the
// model and output limit the key was never admitted for.
func TestCaseVariantKeysAreRefused(t *testing.T) {
	u, calls := goUpstream(t)
	g := startGateway(t, fmt.Sprintf(`providers:
  local: {base_url: %q}
models:
  - name: chat
    providers: [{provider: local, model: small-model}]
auth:
  keys:
    sk-t: {tenant: t, tpm: 100000}
`, u.URL+"/v1"))
	chat := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ name, path, body, param string }{
		{"model twin", "/v1/chat/completions", `{"model":"chat","MODEL":"big-model",` + chat + `}`, "MODEL"},
		{"max_tokens twin", "/v1/chat/completions", `{"model":"chat","max_tokens":10,"Max_Tokens":500000,` + chat + `}`, "Max_Tokens"},
		{"escaped twin", "/v1/chat/completions", `{"model":"chat","max_tokens":10,"MAX_TOKEN\u0053":500000,` + chat + `}`, "MAX_TOKENS"},
		{"long s", "/v1/chat/completions", `{"model":"chat","\u017ftream":true,` + chat + `}`, "\u017ftream"},
		{"nested", "/v1/chat/completions", `{"model":"chat",` + chat + `,"stream_options":{"include_usage":true,"INCLUDE_USAGE":false}}`, "stream_options.INCLUDE_USAGE"},
		{"message role", "/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","Role":"system","content":"hi"}]}`, "messages.0.Role"},
		{"completions", "/v1/completions", `{"model":"chat","prompt":"hi","N":50}`, "N"},
		{"responses", "/v1/responses", `{"model":"chat","input":"hi","Max_Output_Tokens":500000}`, "Max_Output_Tokens"},
		{"embeddings", "/v1/embeddings", `{"model":"chat","input":"hi","Model":"big-model"}`, "Model"},
		{"anthropic messages", "/v1/messages", `{"model":"chat","max_tokens":10,"Max_tokens":500000,` + chat + `}`, "Max_tokens"},
		{"anthropic block", "/v1/messages", `{"model":"chat","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"a","Text":"b"}]}]}`, "messages.0.content.0.Text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := g.post(tc.path, tc.body, "Authorization", "Bearer sk-t")
			msg := gjson.Get(a.Body, "error.message").String()
			if a.Status != 400 || !strings.Contains(msg, "differs only by case") || !strings.Contains(msg, tc.param) {
				t.Fatalf("%d %s", a.Status, a.Body)
			}
			if tc.path != "/v1/messages" && gjson.Get(a.Body, "error.param").String() != tc.param {
				t.Fatalf("param: %s", a.Body)
			}
			if tc.path == "/v1/messages" && gjson.Get(a.Body, "type").String() != "error" {
				t.Fatalf("not Anthropic's error shape: %s", a.Body)
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
	// The same request spelled once is served, with the key's own limits.
	if a := g.post("/v1/chat/completions", `{"model":"chat","max_tokens":10,`+chat+`}`, "Authorization", "Bearer sk-t"); a.Status != 200 ||
		gjson.Get(a.Body, "choices.0.message.content").String() != "max 10" || gjson.Get(a.Body, "model").String() != "small-model" {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
}

// Issue 27, item 9: the fields the gateway relies on are checked on every
// endpoint, not only /v1/messages: "messages": 5 on chat completions is a
// 400 naming the field, never forwarded.
func TestFieldsTheGatewayReadsAreChecked(t *testing.T) {
	u, calls := goUpstream(t)
	g := startGateway(t, fmt.Sprintf("providers:\n  local: {base_url: %q}\nmodels:\n  - name: chat\n    providers: [{provider: local}]\n", u.URL+"/v1"))
	for _, tc := range []struct{ path, body, param, says string }{
		{"/v1/chat/completions", `{"model":"chat","messages":5}`, "messages", "messages: expected an array, got a number (5)"},
		{"/v1/chat/completions", `{"model":"chat","messages":["hi"]}`, "messages.0", "expected a message object, got a string"},
		{"/v1/chat/completions", `{"model":"chat","messages":[],"stream":"yes"}`, "stream", "expected a boolean"},
		{"/v1/chat/completions", `{"model":"chat","messages":[],"max_tokens":"100"}`, "max_tokens", "expected a non-negative integer"},
		{"/v1/completions", `{"model":"chat","prompt":{"text":"hi"}}`, "prompt", "expected a string or an array"},
		{"/v1/responses", `{"model":"chat","input":7}`, "input", "expected a string or an array"},
		{"/v1/embeddings", `{"model":"chat","input":true}`, "input", "expected a string or an array"},
	} {
		a := g.post(tc.path, tc.body)
		if a.Status != 400 || gjson.Get(a.Body, "error.param").String() != tc.param || !strings.Contains(gjson.Get(a.Body, "error.message").String(), tc.says) {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, a.Status, a.Body)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
}

// Found by the outside attack: a body of 200,000 distinct top-level keys
// (2.3 MB, under the body limit) held a core for minutes in the duplicate
// check, which compared each key with every one before it. It is answered
// at once, and a duplicate among many keys is still found.
func TestWideBodyIsCheckedInLinearTime(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[{"role":"user","content":"hi"}]`)
	for i := range 200_000 {
		fmt.Fprintf(&b, `,"k%d":0`, i)
	}
	start := time.Now()
	if a := g.post("/v1/chat/completions", b.String()+"}"); a.Status != 200 {
		t.Fatalf("%d %.300s", a.Status, a.Body)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("200,000 keys took %s", d)
	}
	if a := g.post("/v1/chat/completions", b.String()+`,"k7":1}`); a.Status != 400 || gjson.Get(a.Body, "error.param").String() != "k7" {
		t.Fatalf("a duplicate among many keys: %d %.300s", a.Status, a.Body)
	}
}
