package server

import (
	"crypto/sha256"
	"net/http"
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
