package proxy

import (
	"testing"

	"github.com/tidwall/gjson"

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
		{"stop without content is no answer", provider.Chat, `{"choices":[{"delta":{},"finish_reason":"stop"}]}`, Empty},
		{"content and stop in one chunk", provider.Chat, `{"choices":[{"delta":{"content":"Hi"},"finish_reason":"stop"}]}`, Commit},
		{"length without content (hidden reasoning)", provider.Chat, `{"choices":[{"delta":{},"finish_reason":"length"}]}`, Commit},
		{"tool_calls finish", provider.Chat, `{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}`, Commit},
		{"content_filter finish", provider.Chat, `{"choices":[{"delta":{},"finish_reason":"content_filter"}]}`, Commit},
		{"one choice stops empty, another answers", provider.Chat, `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{"content":"x"}}]}`, Commit},
		{"completions stop without text", provider.Completions, `{"choices":[{"text":"","index":0,"finish_reason":"stop"}]}`, Empty},
		{"second choice has the token", provider.Chat, `{"choices":[{"index":0,"delta":{"role":"assistant"}},{"index":1,"delta":{"content":"x"}}]}`, Commit},
		{"completions text", provider.Completions, `{"choices":[{"text":"Hi","index":0,"finish_reason":null}]}`, Commit},
		{"completions empty text", provider.Completions, `{"choices":[{"text":"","index":0,"finish_reason":null}]}`, Hold},
		{"completions error", provider.Completions, `{"error":{"message":"x"}}`, Fail},
		{"messages: end_turn before any block", provider.Messages, `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`, Empty},
		{"messages: max_tokens is an answer", provider.Messages, `{"type":"message_delta","delta":{"stop_reason":"max_tokens"}}`, Commit},
		{"messages: tool_use start", provider.Messages, `{"type":"content_block_start","content_block":{"type":"tool_use"}}`, Commit},
		{"messages: stop before anything", provider.Messages, `{"type":"message_stop"}`, Empty},
		{"responses: completed with no output", provider.Responses, `{"type":"response.completed","response":{"output":[]}}`, Empty},
		{"responses: completed with empty text", provider.Responses, `{"type":"response.completed","response":{"output":[{"type":"message","content":[{"type":"output_text","text":""}]}]}}`, Empty},
		{"responses: completed with a tool call", provider.Responses, `{"type":"response.completed","response":{"output":[{"type":"function_call"}]}}`, Commit},
		{"responses: completed with text", provider.Responses, `{"type":"response.completed","response":{"output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]}]}}`, Commit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := sse.Event{Raw: []byte("data: " + tt.data + "\n\n")}
			if tt.ep == provider.Messages || tt.ep == provider.Responses {
				ev.Name = gjsonType(tt.data)
			}
			if tt.data != "" {
				ev.Data = []byte(tt.data)
			}
			if got := GateFor(tt.ep)(&ev); got != tt.want {
				t.Fatalf("verdict %v, want %v", got, tt.want)
			}
		})
	}
}

func gjsonType(data string) string { return gjson.Get(data, "type").String() }
