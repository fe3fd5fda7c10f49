package server

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestAdvisoryPrefix: limits.advisory_prefix renames the three headers, so
// a client written for MultiLLM's X-MultiLLM-RateLimit-* reads them
// unchanged; the default names are then absent.
func TestAdvisoryPrefix(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a")+`auth:
  keys:
    sk-two: {tenant: acme, rpm: 2}
limits: {advisory_headers: true, advisory_prefix: X-MultiLLM-RateLimit}
`)
	a := g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two")
	if a.Status != 200 || a.Header.Get("X-MultiLLM-RateLimit-Limit") != "2" || a.Header.Get("X-MultiLLM-RateLimit-Remaining") != "1" ||
		a.Header.Get("X-MultiLLM-RateLimit-Reset") == "" {
		t.Fatalf("%d %v", a.Status, a.Header)
	}
	if a.Header.Get("X-Switchboard-RateLimit-Limit") != "" {
		t.Fatalf("default names still sent: %v", a.Header)
	}
	g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two")
	r := g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-two")
	if r.Status != 429 || gjson.Get(r.Body, "error.code").String() != "rate_limit_exceeded" ||
		r.Header.Get("X-MultiLLM-RateLimit-Remaining") != "0" || r.Header.Get("X-MultiLLM-RateLimit-Reset") != r.Header.Get("Retry-After") {
		t.Fatalf("refusal: %d %v", r.Status, r.Header)
	}
}
