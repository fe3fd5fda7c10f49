package server

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// SECURITY.md's table of what is exposed without a key, with gateway keys
// configured: only /health, /ready and the dashboard's static page answer;
// every data path is 401 (and /metrics too).
func TestWhatIsExposedWithoutAKey(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a")+"auth:\n  keys:\n    sk-a: {tenant: acme}\n")
	for _, tc := range []struct {
		method, path string
		status       int
		body         string // a substring of the answer
	}{
		{"GET", "/health", 200, `{"status":"ok"}`},
		{"GET", "/ready", 200, `"ready"`},
		{"GET", "/dashboard", 200, "<html"},
		{"GET", "/dashboard/data", 401, "authentication_error"},
		{"GET", "/v1/models", 401, "authentication_error"},
		{"GET", "/v1/models/m", 401, "authentication_error"},
		{"GET", "/v1/usage", 401, "authentication_error"},
		{"GET", "/v1/health/detail", 401, "authentication_error"},
		{"GET", "/metrics", 401, ""},
		{"POST", "/v1/chat/completions", 401, "authentication_error"},
		{"GET", "/nothing", 404, ""},
	} {
		var a answer
		if tc.method == "GET" {
			a = g.get(tc.path)
		} else {
			a = g.post(tc.path, chatBody)
		}
		if a.Status != tc.status || !strings.Contains(strings.ToLower(a.Body), strings.ToLower(tc.body)) {
			t.Errorf("%s %s without a key: %d %.120q, want %d with %q", tc.method, tc.path, a.Status, a.Body, tc.status, tc.body)
		}
		if tc.path == "/health" && strings.TrimSpace(a.Body) != `{"status":"ok"}` {
			t.Errorf("/health says more than its status: %q", a.Body)
		}
	}
	if g.mock("a").Calls() != 0 {
		t.Fatal("an unauthenticated request reached the provider")
	}
}

// With auth off nothing is metered: /v1/usage answers, and its counts stay
// 0 however much is served (README's /v1/usage row).
func TestUsageWithAuthOffCountsNothing(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	for range 3 {
		if a := g.post("/v1/chat/completions", chatBody); a.Status != 200 {
			t.Fatalf("%d %s", a.Status, a.Body)
		}
	}
	u := g.get("/v1/usage")
	if u.Status != 200 || !gjson.Get(u.Body, "requests_today").Exists() ||
		gjson.Get(u.Body, "requests_today").Int() != 0 || gjson.Get(u.Body, "tokens_today").Int() != 0 {
		t.Fatalf("usage with auth off: %d %s", u.Status, u.Body)
	}
}
