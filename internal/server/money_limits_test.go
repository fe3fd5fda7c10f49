package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"switchboard/internal/inference"
	"switchboard/internal/spend"
)

// failingYAML: model m on two providers that always fail with 503,
// retried three times each: six attempts for one client request.
func failingYAML(extra string) string {
	return `providers:
  a: {type: mock, mock: {tokens: 3, fail_rate: 1, fail_status: 503}}
  b: {type: mock, mock: {tokens: 3, fail_rate: 1, fail_status: 503}}
models:
  - name: m
    providers: [{provider: a, model: a-model}, {provider: b, model: b-model}]
retries: {max_attempts: 3, max_rounds: 1, backoff_base: 0.001, max_backoff: 0.002}
health: {breaker: {threshold: 0}}
` + extra
}

// A tenant's rpm and daily count describe what it asked for: one request
// that the gateway retried and fell back with six times counts once, and
// its answer is the providers' outage, never the tenant's 429. Under
// tenant_counting: attempt (llmshim's rule) every attempt counts, and
// still the outage is the answer.
func TestTenantCountersCountClientRequests(t *testing.T) {
	keys := "auth:\n  keys:\n    k: {tenant: acme, rpm: 3, daily_requests: 3}\n"
	eachStore(t, func(t *testing.T, kind string) {
		for _, tt := range []struct {
			counting      string
			rpmLeft       int64
			secondRefused bool
		}{{"", 2, false}, {"limits: {tenant_counting: attempt}\n", 0, true}} {
			g := moneyGateway(t, kind, failingYAML(keys+tt.counting))
			a := g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer k")
			if a.Status != 503 || gjson.Get(a.Body, "error.code").String() == "rate_limit_exceeded" {
				t.Fatalf("%q: the outage answered %d %s", tt.counting, a.Status, a.Body)
			}
			u := g.get("/v1/usage", "Authorization", "Bearer k")
			if rpm := gjson.Get(u.Body, "limits.rpm.remaining").Int(); rpm != tt.rpmLeft {
				t.Fatalf("%q: rpm left %d after one request, want %d: %s", tt.counting, rpm, tt.rpmLeft, u.Body)
			}
			// The second request: the daily count (2) admits it when
			// requests count, refuses it when the first one's attempts
			// used it up.
			a = g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer k")
			refused := a.Status == 429
			if refused != tt.secondRefused {
				t.Fatalf("%q: second request %d %s", tt.counting, a.Status, a.Body)
			}
			if !refused && gjson.Get(g.get("/v1/usage", "Authorization", "Bearer k").Body, "requests_today").Int() != 2 {
				t.Fatalf("%q: two requests not counted as two", tt.counting)
			}
		}
	})
}

// Under load too: 40 concurrent requests, each failing over six attempts,
// use 40 of the tenant's 100 rpm and are all answered with the outage.
func TestTenantCountsConcurrentRequestsOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		g := moneyGateway(t, kind, failingYAML("auth:\n  keys:\n    k: {tenant: acme, rpm: 100}\n"))
		var wg sync.WaitGroup
		for range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if a, err := send(g.URL, chatBody, "Authorization", "Bearer k"); err != nil || a.Status != 503 {
					t.Errorf("%v %d %s", err, a.Status, a.Body)
				}
			}()
		}
		wg.Wait()
		u := g.get("/v1/usage", "Authorization", "Bearer k")
		// The bucket refills as it goes (100 a minute): about 60 left, not
		// the 0 that 240 attempts would leave.
		if rpm, today := gjson.Get(u.Body, "limits.rpm.remaining").Int(), gjson.Get(u.Body, "requests_today").Int(); rpm < 60 || rpm > 70 || today != 40 {
			t.Fatalf("rpm left %d, requests today %d; want about 60 and 40", rpm, today)
		}
	})
}

// Advisory headers describe the caller's own counter, never a provider's
// bucket; a daily refusal waits at most a day and sends its Reset.
func TestAdvisoryHeadersShowTheCallersCounter(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		g := moneyGateway(t, kind, `providers:
  p: {type: mock, rpm: 3, mock: {tokens: 3}}
models: [{name: m, providers: [{provider: p, model: pm}]}]
limits: {advisory_headers: true}
auth:
  keys:
    k: {tenant: acme, rpm: 100}
    d: {tenant: daily, daily_requests: 1}
`)
		g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer d")
		a := g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer d")
		ra, _ := strconv.Atoi(a.Header.Get("Retry-After"))
		reset, _ := strconv.Atoi(a.Header.Get("X-Switchboard-RateLimit-Reset"))
		if a.Status != 429 || gjson.Get(a.Body, "error.code").String() != "daily_limit_exceeded" || ra < 86300 || ra > 86400 || reset != ra {
			t.Fatalf("daily refusal %d Retry-After %q Reset %q: %s", a.Status, a.Header.Get("Retry-After"),
				a.Header.Get("X-Switchboard-RateLimit-Reset"), a.Body)
		}
		a = g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer k")
		if a.Status != 200 || a.Header.Get("X-Switchboard-RateLimit-Limit") != "100" || a.Header.Get("X-Switchboard-RateLimit-Remaining") != "99" {
			t.Fatalf("%d limit %q remaining %q: %s", a.Status, a.Header.Get("X-Switchboard-RateLimit-Limit"),
				a.Header.Get("X-Switchboard-RateLimit-Remaining"), a.Body)
		}
		// The provider's bucket refuses: the headers do not show it.
		g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer k")
		a = g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer k")
		if a.Status != 429 || a.Header.Get("X-Switchboard-RateLimit-Limit") == "3" {
			t.Fatalf("provider refusal %d, headers %v: %s", a.Status, a.Header, a.Body)
		}
	})
}

// A budget refusal names whose budget refused, and the output limit it
// suggests is the largest that fits: sent with it the request is served,
// with one more it is refused again.
func TestBudgetRefusalSuggestsALimitThatFits(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		u := newWire(t)
		g := moneyGateway(t, kind, wireYAML(u, "full", "auth:\n  keys:\n    k: {tenant: acme, budget_usd: 0.05}\n"))
		ask := func(max int64) answer {
			return g.post("/v1/chat/completions", fmt.Sprintf(`{"model":"m","max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, max),
				"Authorization", "Bearer k")
		}
		a := ask(100)
		msg := gjson.Get(a.Body, "error.message").String()
		if a.Status != 400 || gjson.Get(a.Body, "error.code").String() != "request_exceeds_budget" || !strings.Contains(msg, `tenant "acme"`) {
			t.Fatalf("%d %s", a.Status, a.Body)
		}
		var fit int64
		if _, err := fmt.Sscanf(msg[strings.Index(msg, "set max_tokens to "):], "set max_tokens to %d or less", &fit); err != nil || fit <= 0 {
			t.Fatalf("no suggestion in %q", msg)
		}
		if a := ask(fit + 1); a.Status != 400 {
			t.Fatalf("max_tokens %d (one more than suggested) served: the suggestion was not the largest", fit+1)
		}
		if a := ask(fit); a.Status != 200 {
			t.Fatalf("max_tokens %d as suggested: %d %s", fit, a.Status, a.Body)
		}
	})
}

// budgetFallbackYAML: big is priced past the key's budget, its fallback
// small well within it.
func budgetFallbackYAML(u *wire, on string) string {
	return fmt.Sprintf(`providers:
  w: {type: openai, base_url: %s/v1, api_key: k}
  w2: {type: openai, base_url: %s/v1, api_key: k}
models:
  - name: big
    providers: [{provider: w, model: full}]
    fallbacks: {models: [small]%s}
  - name: small
    providers: [{provider: w2, model: full}]
pricing:
  w: {full: {input: 1000, output: 1000, context: 100000, max_output: 1000}}
  w2: {full: {input: 1, output: 1, context: 100000, max_output: 1000}}
retries: {max_attempts: 1, max_rounds: 1}
auth:
  keys:
    k: {tenant: acme, budget_usd: 0.5}
`, u.srv.URL, u.srv.URL, on)
}

// A request the budget cannot take on a model is served by a cheaper
// fallback model (fallbacks.on: budget, in the default), logged with that
// reason; left out of on, the refusal is the answer.
func TestFallbackOnBudget(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		u := newWire(t)
		body := `{"model":"big","messages":[{"role":"user","content":"hi"}]}`
		g := moneyGateway(t, kind, budgetFallbackYAML(u, ""))
		a := g.post("/v1/chat/completions", body, "Authorization", "Bearer k")
		if a.Status != 200 || a.Header.Get(inference.FallbackModelHeader) != "small" {
			t.Fatalf("%d fallback %q: %s", a.Status, a.Header.Get(inference.FallbackModelHeader), a.Body)
		}
		if logs := g.logs.String(); !strings.Contains(logs, `msg="model fallback"`) || !strings.Contains(logs, "condition=budget") {
			t.Fatalf("no fallback line naming the budget:\n%s", logs)
		}
		g = moneyGateway(t, kind, budgetFallbackYAML(u, ", on: [error]"))
		if a := g.post("/v1/chat/completions", body, "Authorization", "Bearer k"); a.Status != 400 ||
			gjson.Get(a.Body, "error.code").String() != "request_exceeds_budget" {
			t.Fatalf("budget left out of on: %d %s", a.Status, a.Body)
		}
	})
}

// A hedge that lost the race is charged what it is known to have cost
// (its input and the in-flight margin, priced), not its worst case; the
// spend shows nothing held once the race is settled.
func TestHedgeLoserChargedKnownCost(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		slow, fast := newHedgeUp(t, "a", true), newHedgeUp(t, "b", false)
		extra := "pricing:\n  a: {a-model: {input: 1000, output: 1000, context: 100000, max_output: 1000}}\n" +
			"  b: {b-model: {input: 1000, output: 1000, context: 100000, max_output: 1000}}\n" +
			"auth: {keys: {k: {tenant: acme, budget_usd: 100}}}\n"
		// The original has long been sent when the hedge starts.
		g := moneyGateway(t, kind, hedgeYAML([]*hedgeUp{slow, fast}, "{after: 50ms}", extra))
		t.Cleanup(slow.free)
		a := recv(t, hedgeCall(t, g, context.Background(), false, "x-api-key", "k"))
		if a.Status != 200 || a.Body != fast.want() {
			t.Fatalf("%d %s", a.Status, a.Body)
		}
		g.proxy.WaitHedges()
		sent, _ := sjson.Set(chatBody, "model", "a-model")
		inputBound := int64(len(sent)) + spend.BaseAllowance + spend.PerMessageAllowance
		loser := (inputBound + spend.InFlightMargin) * 1_000_000
		if slow.calls.Load() == 0 {
			// A machine slow enough that the race was decided before the
			// original was sent: nothing was sent, nothing is owed.
			t.Log("the original was never sent")
			loser = 0
		} else {
			waitFor(t, func() bool { return slow.canceled.Load() == 1 })
		}
		worst := (inputBound + 1000) * 1_000_000
		winner := int64(5+hedgeChunks) * 1_000_000
		var settled, held int64
		deadline := time.Now().Add(5 * time.Second)
		for {
			if settled, held = g.spendOf("k"); held == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if held != 0 || settled != winner+loser {
			t.Fatalf("settled %d held %d; want the winner's %d and the loser's known %d (its worst case %d)",
				settled, held, winner, loser, worst)
		}
	})
}

// /dashboard/data lists a tenant's settled spend and its held money apart.
func TestDashboardShowsHeldApart(t *testing.T) {
	eachStore(t, func(t *testing.T, kind string) {
		u := newWire(t)
		// promptonly answers leave their holds; the operator reads the view.
		g := moneyGateway(t, kind, wireYAML(u, "promptonly", "auth:\n  keys:\n    k: {tenant: acme, budget_usd: 10}\n    ops: {tenant: ops, role: admin}\n"))
		g.post("/v1/chat/completions", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer k")
		_, held := g.spendOf("k")
		d := g.get("/dashboard/data", "Authorization", "Bearer ops")
		acme := gjson.Get(d.Body, `tenants.#(tenant=="acme")`)
		if held == 0 || acme.Get("held_usd").String() != spend.FormatUSD(held) || acme.Get("spent_usd").String() != "0" {
			t.Fatalf("held %d; dashboard %s", held, acme.Raw)
		}
	})
}
