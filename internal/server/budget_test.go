package server

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestRequestExceedsBudget: a request whose own worst-case reservation is
// larger than what is left is told so (its own code, the amounts, the
// max_tokens that fits, no Retry-After), and the suggested max_tokens is
// then admitted; a budget that is really used up still answers 429
// budget_exceeded with Retry-After.
func TestRequestExceedsBudget(t *testing.T) {
	// Without max_tokens the reservation is the input bound (~140 tokens)
	// plus the catalog's 100 output tokens at 1000 USD per million: about
	// 0.24 USD, more than the whole 0.2 USD budget.
	g := startGateway(t, pricedYAML("auth:\n  keys:\n    k: {tenant: acme, budget_usd: 0.2}\n    frozen: {tenant: ice, budget_usd: 0}\n"))
	a := g.post("/v1/chat/completions", chatBody, "x-api-key", "k")
	msg := gjson.Get(a.Body, "error.message").String()
	if a.Status != 400 || gjson.Get(a.Body, "error.code").String() != "request_exceeds_budget" ||
		gjson.Get(a.Body, "error.param").String() != "max_tokens" {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	if ra := a.Header.Get("Retry-After"); ra != "" {
		t.Fatalf("Retry-After %q tells the client to wait, but waiting cannot help", ra)
	}
	for _, want := range []string{"reserves up to 0.", "0.2 USD left", "max_tokens"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("message lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "exhausted") || strings.Contains(msg, "wait") {
		t.Fatalf("message misleads: %s", msg)
	}
	if g.mock("p").Calls() != 0 {
		t.Fatal("the refused request was sent")
	}
	m := regexp.MustCompile(`set max_tokens to (\d+) or less`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no max_tokens advice: %s", msg)
	}
	body := `{"model":"m","max_tokens":` + m[1] + `,"messages":[{"role":"user","content":"hi"}]}`
	if a := g.post("/v1/chat/completions", body, "x-api-key", "k"); a.Status != 200 {
		t.Fatalf("the advised max_tokens %s was refused: %d %s", m[1], a.Status, a.Body)
	}

	a = g.post("/v1/chat/completions", chatBody, "x-api-key", "frozen")
	if a.Status != 429 || gjson.Get(a.Body, "error.code").String() != "budget_exceeded" || a.Header.Get("Retry-After") == "" {
		t.Fatalf("exhausted budget: %d %q %s", a.Status, a.Header.Get("Retry-After"), a.Body)
	}
}
