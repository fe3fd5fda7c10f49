package track

import (
	"math"
	"strings"
	"testing"
	"time"

	"switchboard/internal/sse"
)

func events(t *testing.T, stream string) []sse.Event {
	t.Helper()
	r := sse.NewReader(strings.NewReader(stream))
	var out []sse.Event
	for {
		ev, err := r.Next()
		if err != nil {
			return out
		}
		out = append(out, ev.Clone())
	}
}

func TestStream(t *testing.T) {
	chunk := func(delta string) string {
		return `data: {"choices":[{"index":0,"delta":` + delta + `}]}` + "\n\n"
	}
	stop := `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	tests := []struct {
		name                      string
		proto                     Protocol
		stream                    string
		content, thinking, tokens int
		totalTPS                  float64 // 0 = check arrival-based > 0
		server                    bool
		clean                     bool
		usage                     Usage
		final                     bool
	}{
		{"chat arrival timing", Chat,
			chunk(`{"role":"assistant","content":""}`) + chunk(`{"content":"a"}`) + chunk(`{"content":"b"}`) + chunk(`{"content":"c"}`) + "data: [DONE]\n\n",
			3, 0, 3, 0, false, true, Usage{}, false},
		{"reasoning then content with usage", Chat,
			chunk(`{"reasoning_content":"hm"}`) + chunk(`{"reasoning_content":"m"}`) + chunk(`{"content":"x"}`) + stop +
				`data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":2}}}` + "\n\ndata: [DONE]\n\n",
			1, 2, 9, 0, false, true, Usage{Input: 7, Output: 9, CacheRead: 2, Reasoning: 2, HasInput: true, HasOutput: true, Known: true}, true},
		{"usage tokens_per_second wins", Chat,
			chunk(`{"content":"a"}`) + chunk(`{"content":"b"}`) + stop + `data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"tokens_per_second":321.5}}` + "\n\n",
			2, 0, 2, 321.5, true, false, Usage{Input: 1, Output: 2, HasInput: true, HasOutput: true, Known: true}, true},
		{"groq completion_time", Chat,
			chunk(`{"content":"a"}`) + stop + `data: {"choices":[],"x_groq":{"usage":{"prompt_tokens":3,"completion_tokens":50,"completion_time":0.25}}}` + "\n\n",
			1, 0, 50, 200, true, false, Usage{Input: 3, Output: 50, HasInput: true, HasOutput: true, Known: true}, true},
		{"fireworks perf_metrics", Chat,
			chunk(`{"content":"a"}`) + stop + `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":40},"perf_metrics":{"generation-duration":0.5}}` + "\n\n",
			1, 0, 40, 80, true, false, Usage{Input: 3, Output: 40, HasInput: true, HasOutput: true, Known: true}, true},
		{"vllm energy comment", Chat,
			chunk(`{"content":"a"}`) + chunk(`{"content":"b"}`) + ": energy {\"duration_seconds\": 0.1}\n\n" + "data: [DONE]\n\n",
			2, 0, 2, 20, true, true, Usage{}, false},
		{"usage in the finishing chunk", Chat,
			chunk(`{"content":"a"}`) + `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":0}}` + "\n\ndata: [DONE]\n\n",
			1, 0, 1, 0, false, true, Usage{Input: 2, HasInput: true, HasOutput: true, Known: true}, true},
		{"an early usage frame is partial", Chat,
			`data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":0}}` + "\n\n" + chunk(`{"content":"a"}`) + stop + "data: [DONE]\n\n",
			1, 0, 1, 0, false, true, Usage{Input: 2, HasInput: true, HasOutput: true, Known: true}, false},
		{"usage beside a choice still generating is partial", Chat,
			`data: {"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":2,"completion_tokens":1}}` + "\n\n" + "data: [DONE]\n\n",
			1, 0, 1, 0, false, true, Usage{Input: 2, Output: 1, HasInput: true, HasOutput: true, Known: true}, false},
		{"content after the usage makes it partial", Chat,
			chunk(`{"content":"a"}`) + stop + `data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":2}}` + "\n\n" +
				chunk(`{"content":"b"}`) + "data: [DONE]\n\n",
			2, 0, 2, 0, false, true, Usage{Input: 2, Output: 2, HasInput: true, HasOutput: true, Known: true}, false},
		{"one of two choices unfinished", Chat,
			chunk(`{"content":"a"}`) + `data: {"choices":[{"index":1,"delta":{"content":"b"}}]}` + "\n\n" + stop +
				`data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":2}}` + "\n\n",
			2, 0, 2, 0, false, false, Usage{Input: 2, Output: 2, HasInput: true, HasOutput: true, Known: true}, false},
		{"prompt tokens only", Chat,
			chunk(`{"content":"a"}`) + stop + `data: {"choices":[],"usage":{"prompt_tokens":2}}` + "\n\ndata: [DONE]\n\n",
			1, 0, 1, 0, false, true, Usage{Input: 2, HasInput: true, Known: true}, true},
		{"anthropic native", Messages,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"cache_read_input_tokens\":3}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"x\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"y\"}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":12}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			1, 1, 12, 0, false, true, Usage{Input: 8, Output: 12, CacheRead: 3, HasInput: true, HasOutput: true, Known: true}, true},
		{"anthropic message_delta with a block open", Messages,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"y\"}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":1}}\n\n" +
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			1, 0, 1, 0, false, true, Usage{Input: 5, Output: 1, HasInput: true, HasOutput: true, Known: true}, false},
		{"responses", Responses,
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":4,\"output_tokens\":6}}}\n\n",
			1, 0, 6, 0, false, true, Usage{Input: 4, Output: 6, HasInput: true, HasOutput: true, Known: true}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(100, 0)
			st := NewStream(tc.proto, start)
			now := start.Add(200 * time.Millisecond)
			for _, ev := range events(t, tc.stream) {
				st.See(&ev, now)
				now = now.Add(10 * time.Millisecond)
			}
			r := st.Result()
			if r.Content != tc.content || r.Thinking != tc.thinking || r.Tokens != tc.tokens || st.Clean != tc.clean || st.Usage != tc.usage {
				t.Fatalf("result %+v clean %v usage %+v", r, st.Clean, st.Usage)
			}
			if st.Final != tc.final {
				t.Fatalf("usage final %v, want %v", st.Final, tc.final)
			}
			if r.TTFT < 200*time.Millisecond || r.TTFT > 220*time.Millisecond {
				t.Fatalf("ttft %v", r.TTFT)
			}
			if r.ServerTiming != tc.server || (tc.totalTPS > 0 && math.Abs(r.TotalTPS-tc.totalTPS) > 1e-6) || (tc.totalTPS == 0 && tc.content+tc.thinking > 1 && r.TotalTPS <= 0) {
				t.Fatalf("tps %v server %v", r.TotalTPS, r.ServerTiming)
			}
		})
	}
}

func TestUnary(t *testing.T) {
	u := Unary(Chat, []byte(`{"usage":{"prompt_tokens":3,"completion_tokens":4}}`))
	if u != (Usage{Input: 3, Output: 4, HasInput: true, HasOutput: true, Known: true}) || !u.Complete(false) {
		t.Fatalf("%+v", u)
	}
	// An explicit zero counts; a missing counter does not.
	if u := Unary(Chat, []byte(`{"usage":{"prompt_tokens":3,"completion_tokens":0}}`)); !u.Complete(false) {
		t.Fatalf("explicit zero: %+v", u)
	}
	if u := Unary(Chat, []byte(`{"usage":{"prompt_tokens":3}}`)); u.Complete(false) || !u.Complete(true) || !u.Known {
		t.Fatalf("prompt only: %+v", u)
	}
	if u := Unary(Messages, []byte(`{"usage":{"output_tokens":3}}`)); u.Complete(false) {
		t.Fatalf("messages output only: %+v", u)
	}
	if u := Unary(Chat, []byte(`{"choices":[]}`)); u.Known {
		t.Fatal("usage invented")
	}
}

// A stream's model and finish reasons, for its span, in each protocol.
func TestStreamModelAndFinish(t *testing.T) {
	tests := []struct {
		name   string
		proto  Protocol
		stream string
		model  string
		finish []string
	}{
		{"chat", Chat, `data: {"model":"gpt-4o-2024","choices":[{"delta":{"content":"a"}}]}` + "\n\n" +
			`data: {"model":"other","choices":[{"delta":{},"finish_reason":"stop"},{"delta":{},"finish_reason":"length"}]}` + "\n\ndata: [DONE]\n\n",
			"gpt-4o-2024", []string{"stop", "length"}},
		{"messages", Messages, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{}}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n",
			"claude-x", []string{"end_turn"}},
		{"responses", Responses, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"o3\",\"status\":\"completed\",\"usage\":{}}}\n\n",
			"o3", []string{"completed"}},
		{"none", Chat, `data: {"choices":[{"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStream(tc.proto, time.Unix(0, 0))
			for _, ev := range events(t, tc.stream) {
				st.See(&ev, time.Unix(1, 0))
			}
			if st.Model != tc.model || strings.Join(st.Finish, ",") != strings.Join(tc.finish, ",") {
				t.Fatalf("model %q finish %v", st.Model, st.Finish)
			}
		})
	}
}
