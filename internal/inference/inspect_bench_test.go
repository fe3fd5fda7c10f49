package inference

import (
	"fmt"
	"strings"
	"testing"

	"switchboard/internal/provider"
)

// inspectChatBody renders a chat request of about size bytes with "model"
// and "stream" among a dozen top-level keys.
func inspectChatBody(size int) []byte {
	var msgs []string
	for i := 0; ; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"Question %d about shipment SHP-%05d in Zürich — what is \"late\" here?"}`, i, i))
		body := `{"model":"gpt-4o-mini","messages":[` + strings.Join(msgs, ",") +
			`],"temperature":0.2,"top_p":1,"n":1,"max_tokens":512,"presence_penalty":0,"frequency_penalty":0,` +
			`"user":"tenant-42","seed":7,"stream":true,"stream_options":{"include_usage":true}}`
		if len(body) >= size {
			return []byte(body)
		}
	}
}

// BenchmarkInspectBody is the envelope check every request pays before
// routing: validate the JSON, refuse duplicate top-level keys, read model
// and stream.
func BenchmarkInspectBody(b *testing.B) {
	for _, n := range []int{2 << 10, 50 << 10} {
		body := inspectChatBody(n)
		b.Run(fmt.Sprintf("%dKB", n>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if model, stream, err := inspectBody(body, provider.Chat); err != nil || model != "gpt-4o-mini" || !stream {
					b.Fatalf("inspectBody = %q %v %v", model, stream, err)
				}
			}
		})
	}
}
