package server

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"switchboard/internal/front"
)

// BenchmarkCheckToken is the per-request gateway-key check: the presented
// key is hashed and compared in constant time with the stored digest.
func BenchmarkCheckToken(b *testing.B) {
	want := sha256.Sum256([]byte("sk-switchboard-0123456789abcdef0123456789abcdef"))
	for _, tc := range []struct{ name, key string }{
		{"match", "sk-switchboard-0123456789abcdef0123456789abcdef"},
		{"mismatch", "sk-switchboard-0123456789abcdef0123456789abcdeX"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				checkToken(tc.key, &want)
			}
		})
	}
	b.Run("presented-key+check", func(b *testing.B) {
		r, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		r.Header.Set("Authorization", "Bearer sk-switchboard-0123456789abcdef0123456789abcdef")
		b.ReportAllocs()
		for b.Loop() {
			if !checkToken(front.PresentedKey(r), &want) {
				b.Fatal("rejected")
			}
		}
	})
}

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
				if model, stream, err := inspectBody(body); err != nil || model != "gpt-4o-mini" || !stream {
					b.Fatalf("inspectBody = %q %v %v", model, stream, err)
				}
			}
		})
	}
}
