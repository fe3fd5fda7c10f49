package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A provider base_url with a query string (Azure-style ?api-version=...)
// is joined as a path plus that query for every provider type: the
// endpoint goes into the path, never into the query's value.
func TestBaseURLQueryIsKeptAsQuery(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // path -> raw query
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.URL.RawQuery
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
		case strings.HasSuffix(r.URL.Path, "/messages"):
			_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`))
		case strings.HasSuffix(r.URL.Path, ":generateContent"):
			_, _ = w.Write([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer up.Close()
	g := startGateway(t, `
providers:
  oai: {type: openai, base_url: "`+up.URL+`/oai/v1?api-version=2024-10-21", api_key: k}
  ant: {type: anthropic, base_url: "`+up.URL+`/ant/v1/?api-version=2024-10-21", api_key: k}
  gem: {type: gemini, base_url: "`+up.URL+`/gem/v1beta?api-version=2024-10-21", api_key: k}
models:
  - {name: a, providers: [{provider: oai, model: m}]}
  - {name: b, providers: [{provider: ant, model: m}]}
  - {name: c, providers: [{provider: gem, model: m}]}
`)
	for _, m := range []string{"a", "b", "c"} {
		a := g.post("/v1/chat/completions", `{"model":"`+m+`","messages":[{"role":"user","content":"hi"}]}`)
		if a.Status != 200 {
			t.Fatalf("model %s: %d %s", m, a.Status, a.Body)
		}
	}
	want := map[string]string{
		"/oai/v1/chat/completions":             "api-version=2024-10-21",
		"/ant/v1/messages":                     "api-version=2024-10-21",
		"/gem/v1beta/models/m:generateContent": "api-version=2024-10-21",
	}
	mu.Lock()
	defer mu.Unlock()
	for p, q := range want {
		if got, ok := seen[p]; !ok || got != q {
			t.Errorf("path %s: query %q (seen %v), want %q", p, got, seen, q)
		}
	}
}
