package proxy

import (
	"testing"

	"switchboard/internal/provider"
	"switchboard/internal/sse"
)

func TestChoicesGates(t *testing.T) {
	tests := []struct {
		name string
		ep   provider.Endpoint
		data string
		want Verdict
	}{
		{"no data (comment, keep-alive)", provider.Chat, ``, Hold},
		{"[DONE] before content", provider.Chat, `[DONE]`, Fail},
		{"broken JSON", provider.Chat, `{"choices":[{"delta":{"content":"x"`, Fail},
		{"error object", provider.Chat, `{"error":{"message":"overloaded"}}`, Fail},
		{"role only", provider.Chat, `{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, Hold},
		{"no choices", provider.Chat, `{"id":"x","choices":[]}`, Hold},
		{"content", provider.Chat, `{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`, Commit},
		{"empty content then refusal", provider.Chat, `{"choices":[{"delta":{"content":"","refusal":"no"}}]}`, Commit},
		{"reasoning", provider.Chat, `{"choices":[{"delta":{"reasoning_content":"hmm"}}]}`, Commit},
		{"reasoning (other spelling)", provider.Chat, `{"choices":[{"delta":{"reasoning":"hmm"}}]}`, Commit},
		{"tool call", provider.Chat, `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":""}}]}}]}`, Commit},
		{"legacy function call", provider.Chat, `{"choices":[{"delta":{"function_call":{"name":"f"}}}]}`, Commit},
		{"finish without content", provider.Chat, `{"choices":[{"delta":{},"finish_reason":"stop"}]}`, Commit},
		{"second choice has the token", provider.Chat, `{"choices":[{"index":0,"delta":{"role":"assistant"}},{"index":1,"delta":{"content":"x"}}]}`, Commit},
		{"completions text", provider.Completions, `{"choices":[{"text":"Hi","index":0,"finish_reason":null}]}`, Commit},
		{"completions empty text", provider.Completions, `{"choices":[{"text":"","index":0,"finish_reason":null}]}`, Hold},
		{"completions error", provider.Completions, `{"error":{"message":"x"}}`, Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := sse.Event{Raw: []byte("data: " + tt.data + "\n\n")}
			if tt.data != "" {
				ev.Data = []byte(tt.data)
			}
			if got := GateFor(tt.ep)(&ev); got != tt.want {
				t.Fatalf("verdict %v, want %v", got, tt.want)
			}
		})
	}
}
