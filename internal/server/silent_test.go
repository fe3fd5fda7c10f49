package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/clock"
)

// twoUpstreams routes model m to the upstream "first", then "second".
func twoUpstreams(first, second, extra string) string {
	return fmt.Sprintf(`providers:
  first: {base_url: %s, api_key: k1}
  second: {base_url: %s, api_key: k2}
models:
  - name: m
    providers: [{provider: first}, {provider: second}]
retries: {max_attempts: 1, max_rounds: 1}
%s`, first, second, extra)
}

func sseUpstream(t *testing.T, events ...string) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			io.WriteString(w, "data: "+e+"\n\n")
		}
	})
}

const (
	roleChunk = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	stopChunk = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
)

// TestEmptyStreamFallsBackInvisibly: a stream that finishes without any
// content is no answer: the next provider serves, and the client never sees
// the empty one. A finish with a tool call or length is an answer.
func TestEmptyStreamFallsBackInvisibly(t *testing.T) {
	good := sseUpstream(t, roleChunk, `{"id":"g","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"from second"},"finish_reason":null}]}`, stopChunk, "[DONE]")
	tests := []struct {
		name   string
		events []string
		served string
	}{
		{"role, stop, DONE", []string{roleChunk, stopChunk, "[DONE]"}, "second"},
		{"stop alone", []string{stopChunk, "[DONE]"}, "second"},
		{"tool call is an answer", []string{roleChunk,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`, "[DONE]"}, "first"},
		{"length after hidden reasoning is an answer", []string{roleChunk, `{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`, "[DONE]"}, "first"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			first := sseUpstream(t, tc.events...)
			g := startGateway(t, twoUpstreams(first.URL, good.URL, ""))
			resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
			if err != nil {
				t.Fatal(err)
			}
			evs := readStream(t, resp)
			if got := resp.Header.Get("X-Switchboard-Provider"); resp.StatusCode != 200 || got != tc.served {
				t.Fatalf("status %d served by %q, want %q: %q", resp.StatusCode, got, tc.served, evs)
			}
			if tc.served == "second" {
				if streamText(evs) != "from second" || evs[len(evs)-1] != "[DONE]" {
					t.Fatalf("client saw %q", evs)
				}
				if !strings.Contains(g.logs.String(), "reason=empty_answer") {
					t.Fatalf("the empty stream was not logged:\n%s", g.logs.String())
				}
			}
		})
	}
}

// TestUnaryFirstByteFallsBack: a unary request to a provider that never
// answers moves on to the next after timeouts.first_byte (not after
// timeouts.request); a model's first_byte_timeout overrides it, and
// false turns it off.
func TestUnaryFirstByteFallsBack(t *testing.T) {
	good := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	})
	tests := []struct {
		name    string
		extra   string
		advance time.Duration
		status  int
		served  string
	}{
		{"global", "timeouts: {first_byte: 2, request: 60}\n", 2 * time.Second, 200, "second"},
		{"per model", "timeouts: {first_byte: 30, request: 60}\n", 3 * time.Second, 200, "second"},
		{"off for the model: the request deadline ends it", "timeouts: {first_byte: 2, request: 60}\n", 60 * time.Second, 504, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hung := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				<-r.Context().Done() // silent until the gateway gives up
			})
			yaml := twoUpstreams(hung.URL, good.URL, tc.extra)
			switch tc.name {
			case "per model":
				yaml = strings.Replace(yaml, "  - name: m\n", "  - name: m\n    first_byte_timeout: 3\n", 1)
			case "off for the model: the request deadline ends it":
				yaml = strings.Replace(yaml, "  - name: m\n", "  - name: m\n    first_byte_timeout: false\n", 1)
				yaml = strings.Replace(yaml, "{provider: first}, {provider: second}", "{provider: first}", 1)
			}
			clk := clock.NewFake(time.Now())
			g := startGatewayClock(t, yaml, clk)
			done := make(chan answer, 1)
			go func() { done <- g.post("/v1/chat/completions", chatBody) }()
			want := 2 // the request deadline and the first-byte bound
			if tc.status == 504 {
				want = 1
			}
			waitFor(t, func() bool {
				hung.mu.Lock()
				defer hung.mu.Unlock()
				return clk.Waiters() == want && len(hung.bodies) > 0
			})
			clk.Advance(tc.advance)
			a := <-done
			if a.Status != tc.status || a.Header.Get("X-Switchboard-Provider") != tc.served {
				t.Fatalf("status %d by %q: %s", a.Status, a.Header.Get("X-Switchboard-Provider"), a.Body)
			}
			if tc.status == 200 {
				if gjson.Get(a.Body, "choices.0.message.content").String() != "ok" || !strings.Contains(g.logs.String(), "reason=first_byte_timeout") {
					t.Fatalf("body %s; logs:\n%s", a.Body, g.logs.String())
				}
			}
		})
	}
}
