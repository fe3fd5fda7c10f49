package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// An upstream stream that closes cleanly before its end (content chunks
// with no finish_reason, no [DONE]) was cut: every client protocol ends in
// its own error event instead of an invented stop (Messages' end_turn, a
// Gemini or chat finish), and the cut answer is never cached. Found from
// outside: a translated Messages stream got end_turn and its repeat was a
// cache hit.
func TestStreamClosedBeforeItsEndIsCut(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{"Hel", "lo"} {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"up\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", c)
		}
		// and the connection closes, cleanly, with the answer unfinished
	}))
	defer up.Close()
	yaml := strings.Replace(cacheYAML, "a: {type: mock, mock: {tokens: 5}}", "a: {type: openai, base_url: "+up.URL+"/v1, api_key: up-key}", 1)
	yaml = strings.Replace(yaml, "performance:", "retries: {max_attempts: 1, max_rounds: 1}\nperformance:", 1)
	g, _ := cacheGateway(t, yaml, nil, nil, nil)
	for _, tc := range []struct {
		name, path, body string
		auth             []string
		wantEnd, notEnd  string
	}{
		{"chat", "/v1/chat/completions", `{"model":"m","temperature":0,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"Authorization", "Bearer sk-acme"}, `"error"`, `"finish_reason":"stop"`},
		{"messages", "/v1/messages", `{"model":"m","temperature":0,"max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"x-api-key", "sk-acme"}, "event: error", `"end_turn"`},
		{"gemini", "/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"temperature":0}}`,
			[]string{"x-goog-api-key", "sk-acme"}, `"error"`, `"STOP"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 2 {
				a := g.post(tc.path, tc.body, tc.auth...)
				if a.Status != http.StatusOK {
					t.Fatalf("try %d: status %d: %s", i, a.Status, a.Body)
				}
				body := string(a.Body)
				if !strings.Contains(body, "Hel") || !strings.Contains(body, tc.wantEnd) || strings.Contains(body, tc.notEnd) {
					t.Fatalf("try %d: the cut stream did not end in the protocol's error (want %q, not %q):\n%s", i, tc.wantEnd, tc.notEnd, body)
				}
				// (the Gemini routes are not cached: no header there)
				if c := a.Header.Get("X-Switchboard-Cache"); c == "hit" || c == "" && tc.name != "gemini" {
					t.Fatalf("try %d: X-Switchboard-Cache %q: a cut answer was stored", i, c)
				}
			}
		})
	}
	if n := storedCount(t, g); n != 0 {
		t.Fatalf("%d cut answers stored", n)
	}
}
