package admit

import (
	"net/http"
	"sync"
	"testing"
)

// countingYAML: a tenant key with its own rpm, tpm and daily count.
const countingYAML = `auth:
  keys:
    sk-a: {tenant: a, rpm: 3, tpm: 10000, daily_requests: 100}
`

func TestRequestCountsTheTenantOnce(t *testing.T) {
	tests := []struct {
		name     string
		counting string
		// want: attempts admitted of 5 in one request, then the tenant's
		// rpm remaining and its requests today.
		admitted, rpmLeft, today int64
	}{
		{"request (default): retries are the gateway's", "", 5, 2, 1},
		{"attempt (llmshim): every attempt counts", "limits: {tenant_counting: attempt}\n", 3, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, countingYAML+tt.counting)
			id := e.id(t, "sk-a")
			rctx, _ := WithRequest(ctx)
			var admitted int64
			for range 5 {
				pm, ref := e.c.Admit(rctx, attempt(id, "m1"))
				if ref != nil {
					if ref.Code != CodeRateLimit || ref.Scope != ScopeRequest {
						t.Fatalf("refusal %+v", ref)
					}
					break
				}
				admitted++
				pm.Fail() // the provider failed; the gateway retries
			}
			u, _ := e.c.Usage(ctx, id, UsageOptions{})
			if admitted != tt.admitted || u.Limits["rpm"].Remaining != tt.rpmLeft || u.RequestsToday != tt.today {
				t.Fatalf("admitted %d, rpm left %d, requests today %d; want %d, %d, %d",
					admitted, u.Limits["rpm"].Remaining, u.RequestsToday, tt.admitted, tt.rpmLeft, tt.today)
			}
		})
	}
}

// The tenant's TPM and its day's tokens settle on the tokens the request's
// answer used, however many attempts it took; a request that got no
// answer gives its estimate back, unless an attempt ended uncertain.
func TestRequestTokensSettleOnUse(t *testing.T) {
	e := setup(t, countingYAML)
	id := e.id(t, "sk-a")
	tpm := func() (left, today int64) {
		u, _ := e.c.Usage(ctx, id, UsageOptions{})
		return u.Limits["tpm"].Remaining, u.TokensToday
	}
	// Answered on the second attempt with 30 tokens.
	rctx, rq := WithRequest(ctx)
	pm, _ := e.c.Admit(rctx, attempt(id, "m1"))
	pm.Fail()
	pm, _ = e.c.Admit(rctx, attempt(id, "m2"))
	pm.Settle(Usage{Input: 20, Output: 10})
	if left, today := tpm(); left != 10000-30 || today != 30 {
		t.Fatalf("after an answer: tpm left %d, tokens today %d; want %d, 30", left, today, 10000-30)
	}
	// No answer: every attempt failed before generating.
	rctx, rq = WithRequest(ctx)
	for _, p := range []string{"m1", "m2"} {
		pm, _ := e.c.Admit(rctx, attempt(id, p))
		pm.Fail()
	}
	if left, _ := tpm(); left >= 10000-30 {
		t.Fatalf("the estimate was not debited: %d", left)
	}
	e.c.Unanswered(rq)
	if left, today := tpm(); left != 10000-30 || today != 30 {
		t.Fatalf("unanswered: tpm left %d, tokens today %d; want the estimate back", left, today)
	}
	// An uncertain end keeps it.
	rctx, rq = WithRequest(ctx)
	pm, _ = e.c.Admit(rctx, attempt(id, "m1"))
	pm.Keep()
	e.c.Unanswered(rq)
	if left, _ := tpm(); left >= 10000-30 {
		t.Fatalf("a kept attempt's estimate was given back: %d", left)
	}
}

// A hedge's sides admit concurrently: exactly one counts the request.
func TestRequestConcurrentAttemptsCountOnce(t *testing.T) {
	e := setup(t, countingYAML)
	id := e.id(t, "sk-a")
	rctx, _ := WithRequest(ctx)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if pm, ref := e.c.Admit(rctx, attempt(id, "m1")); ref == nil {
				pm.Fail()
			} else {
				t.Errorf("refused: %+v", ref)
			}
		}()
	}
	wg.Wait()
	if u, _ := e.c.Usage(ctx, id, UsageOptions{}); u.RequestsToday != 1 || u.Limits["rpm"].Remaining != 2 {
		t.Fatalf("requests today %d, rpm left %d; want 1 and 2", u.RequestsToday, u.Limits["rpm"].Remaining)
	}
}

// Every attempt of a request shows the caller's own counter in its
// headers, as the request's counted attempt saw it, never a provider's
// bucket.
func TestRequestAdviceIsTheCallersCounter(t *testing.T) {
	e := setup(t, "")
	if err := e.c.Configure(parse(t, `providers:
  m1: {type: mock, rpm: 3}
  m2: {type: mock}
models: [{name: demo, providers: [{provider: m1}, {provider: m2}]}]
store: {backend: memory}
auth:
  keys:
    sk-a: {tenant: a, rpm: 100}
`)); err != nil {
		t.Fatal(err)
	}
	id := e.id(t, "sk-a")
	rctx, _ := WithRequest(ctx)
	for _, p := range []string{"m1", "m2", "m1"} {
		pm, ref := e.c.Admit(rctx, attempt(id, p))
		if ref != nil {
			t.Fatal(ref)
		}
		if lim, rem, _, ok := pm.Advice(); !ok || lim != 100 || rem != 99 {
			t.Fatalf("advice on %s = %d %d %v, want the tenant's 100 with 99 left", p, lim, rem, ok)
		}
		pm.Fail()
	}
}

// A daily refusal waits at most a day, and says so in every header.
func TestDailyRefusalAtMostADay(t *testing.T) {
	e := setup(t, "auth:\n  keys:\n    sk-a: {tenant: a, daily_requests: 1}\n")
	id := e.id(t, "sk-a")
	pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
	if ref != nil {
		t.Fatal(ref)
	}
	pm.Fail()
	_, ref = e.c.Admit(ctx, attempt(id, "m1"))
	if ref == nil || ref.Code != CodeDaily || ref.RetryAfter != 86400 || ref.Advice.Reset != 86400 {
		t.Fatalf("daily refusal %+v", ref)
	}
	h := http.Header{}
	ref.Advice.SetHeaders(h, DefaultNames)
	if h.Get(HeaderReset) != "86400" || h.Get(HeaderLimit) != "1" || h.Get(HeaderRemaining) != "0" {
		t.Fatalf("headers %v", h)
	}
}
