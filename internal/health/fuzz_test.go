package health

import (
	"net/http"
	"testing"
	"time"
)

// FuzzStatedWait: whatever an upstream states as its reset (headers or
// body), the wait is within [0, MaxStatedWait] and nothing panics.
func FuzzStatedWait(f *testing.F) {
	f.Add("30", "", "", "", []byte(nil))
	f.Add("Wed, 21 Oct 2015 07:28:00 GMT", "", "", "", []byte(nil))
	f.Add("", "6m0s", "1d", "", []byte(nil))
	f.Add("", "1700000000", "100ms", "2024-01-01T00:00:00Z", []byte(nil))
	f.Add("", "", "", "", []byte(`{"error":{"message":"Please try again in 1m30.5s","reset_at":"2099-01-01T00:00:00Z","retry_after_ms":1e308}}`))
	f.Add("-1", "NaN", "1e400", "garbage", []byte(`{"reset":-5}`))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, retryAfter, resetReq, resetTok, anthropic string, body []byte) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		h.Set("X-Ratelimit-Reset-Requests", resetReq)
		h.Set("X-Ratelimit-Reset-Tokens", resetTok)
		h.Set("Anthropic-Ratelimit-Requests-Reset", anthropic)
		d, ok := StatedWait(h, body, now)
		if d < 0 || d > MaxStatedWait || !ok && d != 0 {
			t.Fatalf("wait %v (ok %v)", d, ok)
		}
	})
}
