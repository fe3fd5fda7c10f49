package server

import (
	"net/http"
	"strings"
	"testing"
)

// A Gemini body with a field the gateway reads twice, once in another
// case, is refused in Google's error shape naming the field, before any
// provider is called (issue 27's case-variant check, on the Gemini routes).
func TestGeminiCaseVariantRefused(t *testing.T) {
	g, _ := cacheGateway(t, cacheYAML, nil, nil, nil)
	for _, body := range []string{
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":5,"MaxOutputTokens":500000}}`,
		`{"contents":"hi"}`,
	} {
		a := g.post("/v1beta/models/m:generateContent", body, "x-goog-api-key", "sk-acme")
		if a.Status != http.StatusBadRequest || !strings.Contains(a.Body, `"status":"INVALID_ARGUMENT"`) ||
			!strings.Contains(a.Body, "MaxOutputTokens") && !strings.Contains(a.Body, "contents") {
			t.Fatalf("%s: %d %s", body, a.Status, a.Body)
		}
	}
	if n := g.mock("a").Calls(); n != 0 {
		t.Fatalf("%d provider calls", n)
	}
	if a := g.post("/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "x-goog-api-key", "sk-acme"); a.Status != http.StatusOK {
		t.Fatalf("a plain request: %d %s", a.Status, a.Body)
	}
}

// A gateway key sent as ?key= (as Google's SDKs do) authenticates the
// Gemini routes and never reaches the log: the access log names the path
// only (README, "?key=").
func TestGeminiQueryKeyNotLogged(t *testing.T) {
	g, _ := cacheGateway(t, cacheYAML, nil, nil, nil)
	a := g.post("/v1beta/models/m:generateContent?key=sk-acme", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if a.Status != http.StatusOK {
		t.Fatalf("?key=: %d %s", a.Status, a.Body)
	}
	if a := g.post("/v1beta/models/m:generateContent?key=sk-nobody", `{"contents":[]}`); a.Status != http.StatusUnauthorized {
		t.Fatalf("a wrong ?key=: %d %s", a.Status, a.Body)
	}
	logs := g.logs.String()
	if !strings.Contains(logs, "generateContent") || strings.Contains(logs, "sk-acme") || strings.Contains(logs, "sk-nobody") {
		t.Fatalf("the log holds a key, or no request line:\n%s", logs)
	}
}
