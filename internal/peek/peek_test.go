package peek

import (
	"bytes"
	"strings"
	"testing"

	"switchboard/internal/limit"
	"switchboard/internal/sse"
)

func TestReadRequest(t *testing.T) {
	tests := []struct {
		name   string
		p      Protocol
		body   string
		model  string
		stream bool
		max    int64
	}{
		{"chat", Chat, `{"model":"gpt-x","stream":true,"max_completion_tokens":300,"messages":[]}`, "gpt-x", true, 300},
		{"responses", Responses, `{"model":"gpt-5","input":"hi","max_output_tokens":50}`, "gpt-5", false, 50},
		{"messages", Messages, `{"model":"claude","max_tokens":128000,"stream":true,"messages":[]}`, "claude", true, 128000},
		{"gemini names no model", Gemini, `{"model":"ignored","contents":[],"generationConfig":{"maxOutputTokens":64}}`, "", false, 64},
		{"stream as a string is not a stream", Chat, `{"model":"m","stream":"true"}`, "m", false, 0},
		{"model not a string", Chat, `{"model":5}`, "", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			r := ReadRequest(tt.p, body)
			copy(body, bytes.Repeat([]byte("x"), len(body))) // what is returned must not alias the body
			if r.Model != tt.model || r.Stream != tt.stream || r.Limits.Output != tt.max {
				t.Errorf("got model %q stream %v max %d", r.Model, r.Stream, r.Limits.Output)
			}
		})
	}
}

func TestPromptTokens(t *testing.T) {
	body := []byte(`{"model":"m", "messages": [{"role":"user","content":"` + strings.Repeat("a", 400) + `"}]}`)
	if got, want := PromptTokens(body), limit.EstimateTokens(body, limit.Target{NoOutput: true}).Input; got != want || got < 100 {
		t.Fatalf("PromptTokens %d, estimate %d", got, want)
	}
}

func TestReadAnswer(t *testing.T) {
	tests := []struct {
		name    string
		p       Protocol
		body    string
		usage   Usage
		finish  string
		content bool
		model   string
	}{
		{"chat", Chat, `{"model":"gpt-x","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":10,"completion_tokens":0,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":0},"cache_creation_input_tokens":2}}`,
			Usage{Input: 10, CacheRead: 4, CacheWrite: 2, HasInput: true, HasOutput: true}, "stop", true, "gpt-x"},
		{"chat prompt tokens only", Chat, `{"choices":[{"message":{"content":null,"tool_calls":[{"id":"c"}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10}}`,
			Usage{Input: 10, HasInput: true}, "tool_calls", true, ""},
		{"chat empty", Chat, `{"choices":[{"message":{"content":""},"finish_reason":"stop"}]}`, Usage{}, "stop", false, ""},
		{"responses incomplete", Responses, `{"model":"gpt-5","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},
			"output":[{"type":"reasoning","summary":[]}],"usage":{"input_tokens":7,"output_tokens":9,"input_tokens_details":{"cached_tokens":1,"cache_write_tokens":2},"output_tokens_details":{"reasoning_tokens":9}}}`,
			Usage{Input: 7, Output: 9, CacheRead: 1, CacheWrite: 2, Reasoning: 9, HasInput: true, HasOutput: true}, "max_output_tokens", true, "gpt-5"},
		{"responses text", Responses, `{"status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"ok"}]}]}`,
			Usage{}, "completed", true, ""},
		{"messages counts cache apart", Messages, `{"model":"claude","stop_reason":"end_turn","content":[{"type":"text","text":"ok"}],
			"usage":{"input_tokens":3,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":5,"output_tokens_details":{"thinking_tokens":2}}}`,
			Usage{Input: 123, Output: 5, CacheRead: 100, CacheWrite: 20, Reasoning: 2, HasInput: true, HasOutput: true}, "end_turn", true, "claude"},
		{"gemini leaves zeros out", Gemini, `{"modelVersion":"gemini-3","candidates":[{"content":{"parts":[{"text":""}]},"finishReason":"MAX_TOKENS"}],
			"usageMetadata":{"promptTokenCount":12,"totalTokenCount":12}}`,
			Usage{Input: 12, HasInput: true, HasOutput: true}, "MAX_TOKENS", false, "gemini-3"},
		{"gemini call and thoughts", Gemini, `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]},"finishReason":"STOP"}],
			"usageMetadata":{"promptTokenCount":12,"toolUsePromptTokenCount":3,"candidatesTokenCount":4,"thoughtsTokenCount":6,"cachedContentTokenCount":8,"totalTokenCount":25}}`,
			Usage{Input: 15, Output: 10, Reasoning: 6, CacheRead: 8, HasInput: true, HasOutput: true}, "STOP", true, ""},
		{"not JSON", Chat, `<html>`, Usage{}, "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			a := ReadAnswer(tt.p, body)
			copy(body, bytes.Repeat([]byte("x"), len(body)))
			if a.Usage != tt.usage || a.Finish != tt.finish || a.Content != tt.content || a.Model != tt.model {
				t.Errorf("got %+v", a)
			}
			if a.Usage.Complete() != (tt.usage.HasInput && tt.usage.HasOutput) {
				t.Errorf("Complete %v", a.Usage.Complete())
			}
		})
	}
}

// event is one SSE event of a fixture stream.
type event struct{ name, data string }

// sseOf writes events as an SSE stream, read back through the gateway's
// SSE reader as a relay would.
func replay(t *testing.T, s *Stream, evs []event) []Seen {
	var buf bytes.Buffer
	w := sse.NewWriter(&buf)
	for _, e := range evs {
		if err := w.Event(e.name, []byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	r := sse.NewReader(&buf)
	var out []Seen
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		out = append(out, s.See(ev.Name, ev.Data))
	}
	return out
}

func TestStreams(t *testing.T) {
	tests := []struct {
		name     string
		p        Protocol
		events   []event
		first    int // index of the event that passes the first-token gate (-1: none)
		errAt    int // index of an error event (-1: none)
		endAt    int // index of the terminal event (-1: none)
		usage    Usage
		final    bool
		finish   string
		contentd bool
	}{
		{name: "chat: usage after the finish counts", p: Chat, events: []event{
			{"", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`},
			{"", `{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`},
			{"", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`},
			{"", `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}`},
			{"", `[DONE]`},
		}, first: 1, errAt: -1, endAt: 4, usage: Usage{Input: 5, Output: 1, HasInput: true, HasOutput: true}, final: true, finish: "stop", contentd: true},
		{name: "chat: a usage frame before the content does not count", p: Chat, events: []event{
			{"", `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":0}}`},
			{"", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c"}]}}]}`},
			{"", `{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`},
			{"", `[DONE]`},
		}, first: 1, errAt: -1, endAt: 3, final: false, finish: "tool_calls", contentd: true},
		{name: "chat: usage on the finish chunk counts; two choices end together", p: Chat, events: []event{
			{"", `{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}},{"index":1,"delta":{"content":"b"}}]}`},
			{"", `{"choices":[{"index":1,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`},
			{"", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":3}}`},
		}, first: 0, errAt: -1, endAt: -1, usage: Usage{Input: 1, Output: 3, HasInput: true, HasOutput: true}, final: true, finish: "stop", contentd: true},
		{name: "chat: an error object", p: Chat, events: []event{
			{"", `{"error":{"message":"overloaded","type":"server_error"}}`},
		}, first: -1, errAt: 0, endAt: -1},
		{name: "responses: the terminal event's usage counts", p: Responses, events: []event{
			{"response.created", `{"type":"response.created","response":{"status":"in_progress","usage":null}}`},
			{"response.output_item.added", `{"type":"response.output_item.added","item":{"type":"reasoning"}}`},
			{"response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","delta":"x"}`},
			{"response.output_item.added", `{"type":"response.output_item.added","item":{"type":"function_call"}}`},
			{"response.completed", `{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":3,"output_tokens":4}}}`},
		}, first: 2, errAt: -1, endAt: 4, usage: Usage{Input: 3, Output: 4, HasInput: true, HasOutput: true}, final: true, finish: "completed", contentd: true},
		{name: "responses: failed, events named only in data", p: Responses, events: []event{
			{"", `{"type":"response.output_text.delta","delta":"x"}`},
			{"", `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error"}}}`},
		}, first: 0, errAt: 1, endAt: 1, finish: "failed", contentd: true},
		{name: "messages: message_delta's usage with message_start's input", p: Messages, events: []event{
			{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}}}`},
			{"ping", `{"type":"ping"}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a"}}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":7,"cache_creation_input_tokens":2}}`},
			{"message_stop", `{"type":"message_stop"}`},
		}, first: 4, errAt: -1, endAt: 6, usage: Usage{Input: 17, Output: 7, CacheRead: 5, CacheWrite: 2, HasInput: true, HasOutput: true}, final: true, finish: "max_tokens", contentd: true},
		{name: "messages: an overloaded error after message_start", p: Messages, events: []event{
			{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`},
			{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		}, first: -1, errAt: 1, endAt: -1},
		{name: "gemini: usage on every chunk counts from the finish on", p: Gemini, events: []event{
			{"", `{"candidates":[{"content":{"role":"model","parts":[{"text":"","thoughtSignature":"s"}]},"index":0}],"usageMetadata":{"promptTokenCount":9}}`},
			{"", `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":1,"totalTokenCount":10}}`},
			{"", `{"candidates":[{"content":{"role":"model","parts":[{"text":"!"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":2,"totalTokenCount":11}}`},
		}, first: 1, errAt: -1, endAt: -1, usage: Usage{Input: 9, Output: 2, HasInput: true, HasOutput: true}, final: true, finish: "STOP", contentd: true},
		{name: "gemini: cut before the finish", p: Gemini, events: []event{
			{"", `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}`},
		}, first: 0, errAt: -1, endAt: -1, final: false},
		{name: "gemini: a blocked prompt", p: Gemini, events: []event{
			{"", `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9}}`},
		}, first: -1, errAt: 0, endAt: -1},
		{name: "gemini: an error object", p: Gemini, events: []event{
			{"", `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`},
		}, first: -1, errAt: 0, endAt: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStream(tt.p)
			seen := replay(t, s, tt.events)
			if len(seen) != len(tt.events) {
				t.Fatalf("%d events read", len(seen))
			}
			for i, sn := range seen {
				if sn.First != (i == tt.first) || sn.Error != (i == tt.errAt) || sn.End != (i == tt.endAt) {
					t.Errorf("event %d: %+v", i, sn)
				}
			}
			u, final := s.Usage()
			if final != tt.final || u != tt.usage {
				t.Errorf("usage %+v final %v", u, final)
			}
			if s.Finish() != tt.finish || s.ContentEnded() != tt.contentd || s.Ended() != (tt.endAt >= 0 && tt.p != Gemini) {
				t.Errorf("finish %q content ended %v ended %v", s.Finish(), s.ContentEnded(), s.Ended())
			}
		})
	}
}

func TestLatestUsageBeforeTheEnd(t *testing.T) {
	s := NewStream(Messages)
	s.See("message_start", []byte(`{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`))
	if u, final := s.Usage(); final || u != (Usage{}) {
		t.Fatalf("usage %+v final %v before message_delta", u, final)
	}
	if l := s.Latest(); l.Input != 10 || !l.HasInput {
		t.Fatalf("latest %+v", l)
	}
}

func BenchmarkStreamChat(b *testing.B) {
	ev := []byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}]}`)
	s := NewStream(Chat)
	b.ReportAllocs()
	for b.Loop() {
		s.See("", ev)
	}
}

func BenchmarkStreamGemini(b *testing.B) {
	ev := []byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"hello"}]},"index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":1,"totalTokenCount":10},"modelVersion":"gemini-3"}`)
	s := NewStream(Gemini)
	b.ReportAllocs()
	for b.Loop() {
		s.See("", ev)
	}
}
