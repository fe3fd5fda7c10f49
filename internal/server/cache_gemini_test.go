package server

import (
	"strings"
	"testing"
)

// TestCacheGeminiInbound is the Gemini case of the cache tests:
// generateContent, and streamGenerateContent in both framings (SSE with
// ?alt=sse, the JSON array without), each its own entry, replayed in the
// framing it was stored in.
func TestCacheGeminiInbound(t *testing.T) {
	g, _ := cacheGateway(t, cacheYAML, nil, nil, nil)
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"temperature":0}}`
	for i, path := range []string{"/v1beta/models/m:generateContent", "/v1beta/models/m:streamGenerateContent?alt=sse",
		"/v1beta/models/m:streamGenerateContent"} {
		first := g.post(path, body, "x-goog-api-key", "sk-acme")
		waitStored(t, g, i+1)
		again := g.post(path, body, "x-goog-api-key", "sk-acme")
		if first.Status != 200 || first.Header.Get("X-Switchboard-Cache") != "miss" || again.Header.Get("X-Switchboard-Cache") != "hit" ||
			again.Body != first.Body || again.Header.Get("Content-Type") != first.Header.Get("Content-Type") {
			t.Fatalf("%s: %d %v / %v\n%s", path, first.Status, first.Header, again.Header, first.Body)
		}
		// Gemini's own answer shape, not another protocol's.
		if !strings.Contains(again.Body, "candidates") {
			t.Fatalf("%s: %s", path, again.Body)
		}
	}
	if g.mock("a").Calls() != 3 {
		t.Fatalf("%d provider calls", g.mock("a").Calls())
	}
}
