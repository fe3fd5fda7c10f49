package provider

import (
	"testing"

	"switchboard/internal/config"
)

func TestUpstreamURLKeepsBaseQuery(t *testing.T) {
	cases := []struct {
		base, path, want string
	}{
		{"https://x.example/v1", "chat/completions", "https://x.example/v1/chat/completions"},
		{"https://x.example/v1/", "chat/completions", "https://x.example/v1/chat/completions"},
		{"https://x.example/v1?api-version=2024-10-21", "chat/completions", "https://x.example/v1/chat/completions?api-version=2024-10-21"},
		{"https://x.example/v1/?api-version=2024-10-21&x=1", "messages", "https://x.example/v1/messages?api-version=2024-10-21&x=1"},
		{"https://x.example/v1beta?key=k", "models/m:streamGenerateContent?alt=sse", "https://x.example/v1beta/models/m:streamGenerateContent?key=k&alt=sse"},
		{"https://x.example/v1beta", "models/m:streamGenerateContent?alt=sse", "https://x.example/v1beta/models/m:streamGenerateContent?alt=sse"},
		{"https://x.example", "", "https://x.example"},
	}
	for _, c := range cases {
		u := NewUpstream(&config.Provider{Name: "p", BaseURL: c.base}, nil)
		if got := u.URL(c.path); got != c.want {
			t.Errorf("base %q path %q: got %q, want %q", c.base, c.path, got, c.want)
		}
	}
}
