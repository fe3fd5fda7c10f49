package server

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

const skipYAML = `providers:
  free: {type: mock, mock: {tokens: 5}}
  free2: {type: mock, mock: {tokens: 5}}
  paid: {type: mock, mock: {tokens: 5}}
models:
  - name: m
    providers: [{provider: free, model: unknown-model}, {provider: paid, model: priced}]
  - name: nopriced
    providers: [{provider: free, model: unknown-model}, {provider: free2, model: other-model}]
pricing:
  paid:
    priced: {input: 1, output: 1, context: 1000, max_output: 100}
retries: {max_attempts: 1, max_rounds: 1}
auth:
  keys:
    sk-acme: {tenant: acme, budget_usd: 5}
    sk-ops: {tenant: ops, role: admin, budget_usd: 5}
`

// TestBudgetedKeySkipsUnpricedProvider: a budgeted key passes over the
// unpriced primary, and the skip is logged at debug and counted; when no
// provider is left the 400 names the skipped ones to an admin and none to
// a tenant.
func TestBudgetedKeySkipsUnpricedProvider(t *testing.T) {
	g := startGateway(t, skipYAML)
	a := g.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "sk-acme")
	if a.Status != 200 || a.Header.Get("X-Switchboard-Provider") != "paid" {
		t.Fatalf("%d served by %q: %s", a.Status, a.Header.Get("X-Switchboard-Provider"), a.Body)
	}
	logs := g.logs.String()
	if !strings.Contains(logs, "provider skipped") || !strings.Contains(logs, "provider=free") ||
		!strings.Contains(logs, "reason=unpriceable_under_budget") || !strings.Contains(logs, "tenant=acme") {
		t.Fatalf("no debug line for the skip:\n%s", logs)
	}
	m := g.get("/metrics", "x-api-key", "sk-ops")
	if !strings.Contains(m.Body, `switchboard_budget_skipped_total{model="unknown-model",provider="free",reason="unpriceable_under_budget"} 1`) {
		t.Fatalf("skip not counted:\n%s", grep(m.Body, "skipped"))
	}

	body := `{"model":"nopriced","messages":[{"role":"user","content":"hi"}]}`
	a = g.post("/v1/chat/completions", body, "x-api-key", "sk-acme")
	msg := gjson.Get(a.Body, "error.message").String()
	if a.Status != 400 || gjson.Get(a.Body, "error.code").String() != "unpriceable_under_budget" {
		t.Fatalf("tenant: %d %s", a.Status, a.Body)
	}
	for _, leak := range []string{"free", "unknown-model", "other-model"} {
		if strings.Contains(msg, leak) {
			t.Errorf("tenant answer leaks %q: %s", leak, msg)
		}
	}
	if !strings.Contains(msg, "2 provider entries") || !strings.Contains(msg, `"nopriced"`) {
		t.Errorf("tenant answer does not say what happened: %s", msg)
	}
	a = g.post("/v1/chat/completions", body, "x-api-key", "sk-ops")
	msg = gjson.Get(a.Body, "error.message").String()
	if a.Status != 400 || !strings.Contains(msg, "free (model unknown-model)") || !strings.Contains(msg, "free2 (model other-model)") {
		t.Fatalf("admin: %d %s", a.Status, a.Body)
	}
	if g.mock("free").Calls()+g.mock("free2").Calls() != 0 {
		t.Fatal("an unpriced provider was sent a budgeted request")
	}
}
