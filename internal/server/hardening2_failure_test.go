package server

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Issue 27, item 9: when a model has several providers and only one was
// tried (the others' circuits open or paused), the answer is the
// gateway's "All providers failed" naming the skipped ones, not that one
// provider's raw error; a model with a single provider keeps passing its
// provider's error through.
func TestFailureNamesSkippedProviders(t *testing.T) {
	g := startGateway(t, `providers:
  picky: {type: mock, mock: {fail_rate: 1, fail_status: 400}}
  broken: {type: mock, mock: {fail_rate: 1, fail_status: 503}}
models:
  - name: multi
    providers: [{provider: picky}, {provider: broken}]
  - name: solo
    providers: [{provider: picky}]
  - name: trip
    providers: [{provider: broken}]
retries: {max_attempts: 2, max_rounds: 1, backoff_base: 0.01, max_backoff: 0.05}
performance: {probing_enabled: false}
`)
	body := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
	}
	solo := g.post("/v1/chat/completions", body("solo"))
	if solo.Status != 400 || strings.Contains(solo.Body, "All providers failed") {
		t.Fatalf("a single provider's error passes through: %d %s", solo.Status, solo.Body)
	}
	for range 3 { // open broken's circuit
		g.post("/v1/chat/completions", body("trip"))
	}
	if !g.Health.Status("broken").CircuitOpen {
		t.Fatal("the circuit did not open")
	}
	a := g.post("/v1/chat/completions", body("multi"))
	msg := gjson.Get(a.Body, "error.message").String()
	if a.Status != 400 || !strings.HasPrefix(msg, "All providers failed: picky:") || !strings.Contains(msg, "broken: skipped (circuit_open)") {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	if gjson.Get(a.Body, "error.detail.skipped.0.provider").String() != "broken" || gjson.Get(a.Body, "error.detail.attempts.0.provider").String() != "picky" {
		t.Fatalf("detail: %s", a.Body)
	}
	// The same in Anthropic's protocol.
	m := g.post("/v1/messages", `{"model":"multi","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	if m.Status != 400 || !strings.Contains(gjson.Get(m.Body, "error.message").String(), "broken: skipped (circuit_open)") {
		t.Fatalf("messages: %d %s", m.Status, m.Body)
	}
}
