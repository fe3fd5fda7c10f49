package server

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// An Idempotency-Key is the tenant's own: another tenant sending the same
// key and body gets its own answer from the provider, never the first
// tenant's stored one; a reused key with another body is 422 with its code.
func TestIdempotencyKeyIsScopedToTheTenant(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a")+"auth:\n  keys:\n    sk-a: {tenant: acme}\n    sk-b: {tenant: globex}\n")
	first := g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer sk-a", "Idempotency-Key", "shared")
	other := g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer sk-b", "Idempotency-Key", "shared")
	if first.Status != 200 || other.Status != 200 || other.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("acme %d, globex %d replayed=%q", first.Status, other.Status, other.Header.Get("Idempotent-Replayed"))
	}
	if n := g.mock("a").Calls(); n != 2 {
		t.Fatalf("%d provider calls; want one per tenant", n)
	}
	again := g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer sk-a", "Idempotency-Key", "shared")
	if again.Header.Get("Idempotent-Replayed") != "true" || again.Body != first.Body {
		t.Fatalf("acme's own repeat was not replayed: %v", again.Header)
	}
	reused := g.post("/v1/chat/completions", strings.Replace(chatBody, `"hi"`, `"bye"`, 1), "Authorization", "Bearer sk-a", "Idempotency-Key", "shared")
	if reused.Status != 422 || gjson.Get(reused.Body, "error.code").String() != "idempotency_key_reused" {
		t.Fatalf("reused key: %d %s", reused.Status, reused.Body)
	}
}
