package track

import (
	"testing"
	"time"

	"switchboard/internal/sse"
)

// BenchmarkStreamSee is the per-chunk cost of measuring a relayed stream:
// every chunk of every tracked stream goes through See.
func BenchmarkStreamSee(b *testing.B) {
	cases := []struct{ name, data string }{
		{"content", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764547200,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`},
		{"reasoning", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764547200,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":" hmm"},"finish_reason":null}]}`},
		{"usage", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764547200,"model":"m","choices":[],"usage":{"prompt_tokens":212,"completion_tokens":200,"total_tokens":412}}`},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			st := NewStream(Chat, time.Unix(0, 0))
			ev := sse.Event{Data: []byte(c.data)}
			now := time.Unix(1, 0)
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			for b.Loop() {
				st.See(&ev, now)
			}
			if st.Content+st.Thinking == 0 && c.name != "usage" {
				b.Fatal("nothing counted")
			}
		})
	}
}
