package redact

import (
	"net/http"
	"testing"
)

func TestRedact(t *testing.T) {
	s := New([]string{"sk-live-abcdef123", "short", "sk-live-abcdef123", ""})
	tests := []struct{ in, want string }{
		{`{"error":{"message":"bad key Bearer sk-live-abcdef123"}}`, `{"error":{"message":"bad key Bearer [REDACTED]"}}`},
		{`a short answer`, `a short answer`}, // under MinLen: never redacted
		{`sk-live-abcdef123sk-live-abcdef123`, `[REDACTED][REDACTED]`},
		{``, ``},
	}
	for _, tc := range tests {
		in := []byte(tc.in)
		if got := string(s.Bytes(in)); got != tc.want {
			t.Errorf("Bytes(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if string(in) != tc.in {
			t.Errorf("Bytes modified its input: %q", in)
		}
		if got := s.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q", tc.in, got)
		}
	}
	shared := []string{"x", "Bearer sk-live-abcdef123"}
	h := http.Header{"X-Echo": shared}
	s.Header(h)
	if h.Get("X-Echo") != "x" || h["X-Echo"][1] != "Bearer [REDACTED]" || shared[1] != "Bearer sk-live-abcdef123" {
		t.Fatalf("header %v, shared %v", h, shared)
	}
	var none *Secrets
	if got := string(none.Bytes([]byte("sk-live-abcdef123"))); got != "sk-live-abcdef123" || New([]string{"a"}) != nil {
		t.Fatal("nil set redacted")
	}
}
