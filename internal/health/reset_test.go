package health

import (
	"net/http"
	"testing"
	"time"
)

func TestStatedWait(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		x := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			x.Set(kv[i], kv[i+1])
		}
		return x
	}
	tests := []struct {
		name   string
		header http.Header
		body   string
		want   time.Duration
		ok     bool
	}{
		{"retry-after seconds", h("Retry-After", "20"), "", 20 * time.Second, true},
		{"retry-after fraction", h("Retry-After", "0.5"), "", 500 * time.Millisecond, true},
		{"retry-after http date", h("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), "", 90 * time.Second, true},
		{"retry-after huge saturates", h("Retry-After", "99999999"), "", MaxStatedWait, true},
		{"retry-after garbage ignored", h("Retry-After", "soon"), "", 0, false},
		{"retry-after negative ignored", h("Retry-After", "-5"), "", 0, false},
		{"reset seconds", h("X-Ratelimit-Reset-Requests", "7"), "", 7 * time.Second, true},
		{"reset unix time", h("X-Ratelimit-Reset-Tokens", "1796040030"), "", clampWait(time.Unix(1796040030, 0).Sub(now)), true},
		{"reset go duration", h("X-Ratelimit-Reset-Tokens", "6m0s"), "", 6 * time.Minute, true},
		{"reset milliseconds", h("X-Ratelimit-Reset-Requests", "100ms"), "", 100 * time.Millisecond, true},
		{"reset days", h("X-Ratelimit-Reset-Requests", "1d"), "", 24 * time.Hour, true},
		{"largest reset wins", h("X-Ratelimit-Reset-Requests", "2s", "X-Ratelimit-Reset-Tokens", "9s"), "", 9 * time.Second, true},
		{"invalid reset ignored", h("X-Ratelimit-Reset-Requests", "banana"), "", 0, false},
		{"anthropic rfc3339", h("Anthropic-Ratelimit-Requests-Reset", now.Add(42*time.Second).Format(time.RFC3339)), "", 42 * time.Second, true},
		{"retry-after beats reset", h("Retry-After", "3", "X-Ratelimit-Reset-Requests", "60"), "", 3 * time.Second, true},
		{"json retry_after_ms", nil, `{"error":{"retry_after_ms":1500}}`, 1500 * time.Millisecond, true},
		{"json reset_at rfc3339", nil, `{"reset_at":"` + now.Add(time.Minute).Format(time.RFC3339) + `"}`, time.Minute, true},
		{"json reset unix", nil, `{"error":{"reset":` + "1796040060" + `}}`, clampWait(time.Unix(1796040060, 0).Sub(now)), true},
		{"prose seconds", nil, `{"error":{"message":"Rate limit reached; resets in 20 seconds"}}`, 20 * time.Second, true},
		{"prose compound", nil, `Please try again in 1m30s.`, 90 * time.Second, true},
		{"nothing stated", nil, `{"error":{"message":"slow down"}}`, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hd := tc.header
			if hd == nil {
				hd = http.Header{}
			}
			got, ok := StatedWait(hd, []byte(tc.body), now)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("StatedWait = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestQuota(t *testing.T) {
	tests := []struct {
		status int
		body   string
		reason string
		ok     bool
	}{
		{402, "", ReasonPaymentRequired, true},
		{429, "", ReasonRateLimited, true},
		{403, `{"error":{"code":"insufficient_quota"}}`, ReasonQuotaExhausted, true},
		{403, `Billing limit reached`, ReasonQuotaExhausted, true},
		{403, `credit balance is too low`, ReasonQuotaExhausted, true},
		{403, `monthly usage limit`, ReasonQuotaExhausted, true},
		{403, `Quota exceeded for model`, ReasonQuotaExhausted, true},
		{403, `{"error":"forbidden: bad key"}`, "", false},
		{500, `quota exceeded`, "", false},
	}
	for _, tc := range tests {
		r, ok := Quota(tc.status, []byte(tc.body))
		if r != tc.reason || ok != tc.ok {
			t.Errorf("Quota(%d, %q) = %q, %v", tc.status, tc.body, r, ok)
		}
	}
}
