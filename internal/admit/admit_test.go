package admit

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/limit"
	"switchboard/internal/store"
	"switchboard/internal/tenant"
)

var ctx = context.Background()

// t0 is 30 s into an hour, so that hourly windows end in 59m30s.
var t0 = time.Date(2025, 6, 1, 12, 0, 30, 0, time.UTC)

const baseYAML = `providers:
  m1: {type: mock}
  m2: {type: mock}
models: [{name: demo, providers: [{provider: m1}, {provider: m2}]}]
store: {backend: memory}
`

type env struct {
	c   *Controller
	clk *clock.Fake
	st  store.Store
	reg *prometheus.Registry
}

func parse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func setup(t *testing.T, extra string) *env {
	t.Helper()
	return setupWith(t, store.NewMemory(), clock.NewFake(t0), extra)
}

func setupWith(t *testing.T, st store.Store, clk *clock.Fake, extra string) *env {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := New(st, clk, reg)
	if err := c.Configure(parse(t, baseYAML+extra)); err != nil {
		t.Fatal(err)
	}
	return &env{c, clk, st, reg}
}

func (e *env) id(t *testing.T, key string) *tenant.Identity {
	t.Helper()
	id, ok := e.c.Authenticate(key)
	if !ok {
		t.Fatalf("key %q refused", key)
	}
	return id
}

const chatBody = `{"model":"demo","messages":[{"role":"user","content":"hello"}],"max_tokens":100}`

func attempt(id *tenant.Identity, provider string) AttemptInfo {
	return AttemptInfo{Identity: id, Provider: provider, ProviderType: "mock", Model: "demo", ClientModel: "demo",
		Endpoint: "chat/completions", Body: []byte(chatBody)}
}

func TestAuthenticate(t *testing.T) {
	e := setup(t, "")
	if id, ok := e.c.Authenticate(""); id != nil || !ok {
		t.Errorf("auth off: %v %v", id, ok)
	}
	e = setup(t, "auth:\n  token: tok\n  keys:\n    sk-a: {tenant: a, rpm: 5}\n")
	tests := []struct {
		key    string
		ok     bool
		tenant string
	}{{"sk-a", true, "a"}, {"tok", true, ""}, {"sk-b", false, ""}, {"", false, ""}}
	for _, tt := range tests {
		id, ok := e.c.Authenticate(tt.key)
		if ok != tt.ok || (ok && id.Tenant != tt.tenant) {
			t.Errorf("Authenticate(%q) = %+v, %v", tt.key, id, ok)
		}
	}
	if got := value(e.c.m.rejected.WithLabelValues("", ReasonUnauthorized)); got != 2 {
		t.Errorf("unauthorized rejections = %v", got)
	}
}

func TestEnterSaturation(t *testing.T) {
	e := setup(t, "limits: {max_concurrency: 2, queue_timeout: 5}\n")
	r1, ref := e.c.Enter(ctx, nil)
	r2, ref2 := e.c.Enter(ctx, nil)
	if ref != nil || ref2 != nil {
		t.Fatal("free slots refused")
	}
	type res struct {
		rel func()
		ref *Refusal
	}
	ch := make(chan res, 1)
	go func() { rel, ref := e.c.Enter(ctx, nil); ch <- res{rel, ref} }()
	waitFor(t, func() bool { return e.clk.Waiters() == 1 })
	e.clk.Advance(5 * time.Second)
	got := <-ch
	if got.ref == nil || got.ref.Status != 503 || got.ref.Code != CodeOverloaded || got.ref.RetryAfter != 5 || got.ref.Scope != ScopeRequest {
		t.Fatalf("saturated = %+v", got.ref)
	}
	// A waiter is served as soon as a slot frees.
	go func() { rel, ref := e.c.Enter(ctx, nil); ch <- res{rel, ref} }()
	waitFor(t, func() bool { return e.clk.Waiters() == 1 })
	r1()
	if got := <-ch; got.ref != nil {
		t.Fatalf("after release: %+v", got.ref)
	} else {
		got.rel()
	}
	r2()
	if n := value(e.c.m.rejected.WithLabelValues("", ReasonOverloaded)); n != 1 {
		t.Errorf("overloaded rejections = %v", n)
	}
	// The gate collector reports in-flight and queue depth.
	if n := series(t, e.reg, "switchboard_admission_inflight") + series(t, e.reg, "switchboard_admission_queue_depth"); n != 2 {
		t.Errorf("gate metrics = %d", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// Buckets admit exactly their limit under 200 concurrent attempts, for
// each scope; the count of permits is the count of upstream hits.
func TestExactLimitUnderConcurrency(t *testing.T) {
	tests := []struct{ name, yaml, key string }{
		{"tenant rpm", "auth:\n  keys:\n    sk-a: {tenant: a, rpm: 50}\n", "sk-a"},
		{"global rpm", "limits: {rpm: 50}\n", ""},
		{"provider rpm", "providers:\n  m1: {type: mock, rpm: 50}\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := tt.yaml
			if strings.HasPrefix(yaml, "providers:") {
				// replace the base providers section
				e := &env{clk: clock.NewFake(t0), st: store.NewMemory()}
				e.c = New(e.st, e.clk, nil)
				if err := e.c.Configure(parse(t, yaml+"  m2: {type: mock}\nmodels: [{name: demo, providers: [{provider: m1}]}]\nstore: {backend: memory}\n")); err != nil {
					t.Fatal(err)
				}
				run200(t, e, nil, 50)
				return
			}
			e := setup(t, yaml)
			var id *tenant.Identity
			if tt.key != "" {
				id = e.id(t, tt.key)
			}
			run200(t, e, id, 50)
		})
	}
}

func run200(t *testing.T, e *env, id *tenant.Identity, want int64) {
	t.Helper()
	var hits atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
			if ref != nil {
				if ref.Status != 429 || ref.RetryAfter < 1 {
					t.Errorf("refusal = %+v", ref)
				}
				return
			}
			hits.Add(1)
			pm.Settle(Usage{Input: 10, Output: 5})
		}()
	}
	wg.Wait()
	if hits.Load() != want {
		t.Errorf("upstream hits = %d, want %d", hits.Load(), want)
	}
}

// An explicit 0 denies with 429 before dispatch and touches no other
// bucket; an omitted limit is unlimited.
func TestExplicitZero(t *testing.T) {
	tests := []struct {
		name, yaml string
		code       string
		scope      Scope
	}{
		{"global rpm", "limits: {rpm: 0, tpm: 1000000}\n", CodeRateLimit, ScopeRequest},
		{"global tpm", "limits: {tpm: 0, rpm: 100}\n", CodeTokenRate, ScopeRequest},
		{"tenant rpm", "limits: {rpm: 100}\n", CodeRateLimit, ScopeRequest},
		{"tenant daily", "limits: {rpm: 100}\n", CodeDaily, ScopeRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := "auth:\n  keys:\n    sk-a: {tenant: a}\n"
			switch tt.name {
			case "tenant rpm":
				keys = "auth:\n  keys:\n    sk-a: {tenant: a, rpm: 0, tpm: 5000}\n"
			case "tenant daily":
				keys = "auth:\n  keys:\n    sk-a: {tenant: a, daily_requests: 0, rpm: 10}\n"
			}
			e := setup(t, tt.yaml+keys)
			id := e.id(t, "sk-a")
			before, _ := e.c.Usage(ctx, id, UsageOptions{})
			_, ref := e.c.Admit(ctx, attempt(id, "m1"))
			if ref == nil || ref.Status != 429 || ref.Code != tt.code || ref.Scope != tt.scope || ref.RetryAfter < 1 {
				t.Fatalf("refusal = %+v", ref)
			}
			after, _ := e.c.Usage(ctx, id, UsageOptions{})
			if after.RequestsToday != 0 || !sameCounters(before.Limits, after.Limits) {
				t.Errorf("a zero limit touched other counters: %+v -> %+v", before, after)
			}
			snaps, _ := e.st.Peek(ctx, t0, []limit.Debit{rpmDebit("g:rpm", 100)})
			if tt.yaml == "limits: {rpm: 100}\n" && snaps[0].Remaining != 100 {
				t.Errorf("global bucket debited: %+v", snaps[0])
			}
		})
	}
	// Omitted everywhere: unlimited.
	e := setup(t, "")
	for range 1000 {
		pm, ref := e.c.Admit(ctx, attempt(nil, "m1"))
		if ref != nil {
			t.Fatalf("unlimited refused: %+v", ref)
		}
		pm.Keep()
	}
}

func sameCounters(a, b map[string]Counter) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// All dimensions are one decision: when the provider's bucket refuses,
// the tenant's and the global buckets keep their tokens; a provider
// refusal may move on, a tenant refusal ends the request.
func TestAllOrNothingAndScopes(t *testing.T) {
	e := setupWith(t, store.NewMemory(), clock.NewFake(t0), "")
	cfg := parse(t, `providers:
  m1: {type: mock, rpm: 1}
  m2: {type: mock}
models: [{name: demo, providers: [{provider: m1}, {provider: m2}]}]
store: {backend: memory}
limits: {rpm: 10}
auth:
  keys:
    sk-a: {tenant: a, rpm: 3}
`)
	if err := e.c.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	id := e.id(t, "sk-a")
	pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
	if ref != nil {
		t.Fatal(ref)
	}
	pm.Fail()
	_, ref = e.c.Admit(ctx, attempt(id, "m1"))
	if ref == nil || ref.Scope != ScopeProvider || ref.Code != CodeRateLimit {
		t.Fatalf("provider refusal = %+v", ref)
	}
	u, _ := e.c.Usage(ctx, id, UsageOptions{})
	if u.Limits["rpm"].Remaining != 2 || u.RequestsToday != 1 {
		t.Errorf("tenant debited by a refused attempt: %+v", u)
	}
	if sn, _ := e.st.Peek(ctx, t0, []limit.Debit{rpmDebit("g:rpm", 10)}); sn[0].Remaining != 9 {
		t.Errorf("global debited by a refused attempt: %+v", sn[0])
	}
	// The loop advances to m2; then the tenant's own limit ends it.
	for range 2 {
		pm, ref := e.c.Admit(ctx, attempt(id, "m2"))
		if ref != nil {
			t.Fatal(ref)
		}
		pm.Settle(Usage{Input: 1, Output: 1})
	}
	_, ref = e.c.Admit(ctx, attempt(id, "m2"))
	if ref == nil || ref.Scope != ScopeRequest || ref.Code != CodeRateLimit {
		t.Fatalf("tenant refusal = %+v", ref)
	}
	if n := value(e.c.m.rejected.WithLabelValues("m2", ReasonTenantQuota)); n != 1 {
		t.Errorf("tenant_quota = %v", n)
	}
	if n := value(e.c.m.rejected.WithLabelValues("m1", ReasonRateLimited)); n != 1 {
		t.Errorf("rate_limited = %v", n)
	}
}

// The two-requests-per-minute example: Remaining 1 then 0, then a 429
// whose Reset equals its Retry-After.
func TestAdvisoryTwoPerMinute(t *testing.T) {
	e := setup(t, "auth:\n  keys:\n    sk-a: {tenant: a, rpm: 2}\n")
	id := e.id(t, "sk-a")
	pm, _ := e.c.Admit(ctx, attempt(id, "m1"))
	if l, r, reset, ok := pm.Advice(); !ok || l != 2 || r != 1 || reset != 30 {
		t.Errorf("first advice = %d %d %d %v", l, r, reset, ok)
	}
	h := http.Header{}
	pm.SetHeaders(h, DefaultNames)
	if h.Get(HeaderLimit) != "2" || h.Get(HeaderRemaining) != "1" || h.Get(HeaderReset) != "30" {
		t.Errorf("headers = %v", h)
	}
	pm.Settle(Usage{Input: 5, Output: 5})
	pm, _ = e.c.Admit(ctx, attempt(id, "m1"))
	if l, r, reset, ok := pm.Advice(); !ok || l != 2 || r != 0 || reset != 60 {
		t.Errorf("second advice = %d %d %d %v", l, r, reset, ok)
	}
	pm.Settle(Usage{Input: 5, Output: 5})
	e.clk.Advance(17 * time.Second)
	_, ref := e.c.Admit(ctx, attempt(id, "m1"))
	if ref == nil || ref.Status != 429 || ref.Code != CodeRateLimit {
		t.Fatalf("third = %+v", ref)
	}
	if ref.Advice.Reset != int64(ref.RetryAfter) || ref.Advice.Limit != 2 || ref.Advice.Remaining != 0 || ref.RetryAfter != 13 {
		t.Errorf("refusal advice = %+v, Retry-After %d", ref.Advice, ref.RetryAfter)
	}
	h = http.Header{}
	ref.Advice.SetHeaders(h, DefaultNames)
	if h.Get(HeaderReset) != "13" || h.Get(HeaderRemaining) != "0" {
		t.Errorf("refusal headers = %v", h)
	}
}

func TestAdviceSelection(t *testing.T) {
	// No RPM: TPM is selected; nothing at all: no advice.
	e := setup(t, "auth:\n  keys:\n    sk-t: {tenant: t, tpm: 100000}\n    sk-d: {tenant: d, daily_requests: 10}\n    sk-n: {tenant: n}\n")
	pm, _ := e.c.Admit(ctx, attempt(e.id(t, "sk-t"), "m1"))
	if l, r, _, ok := pm.Advice(); !ok || l != 100000 || r >= 100000 {
		t.Errorf("tpm advice = %d %d %v", l, r, ok)
	}
	pm, _ = e.c.Admit(ctx, attempt(e.id(t, "sk-d"), "m1"))
	if l, r, reset, ok := pm.Advice(); !ok || l != 10 || r != 9 || reset != 86400 {
		t.Errorf("daily advice = %d %d %d %v", l, r, reset, ok)
	}
	pm, _ = e.c.Admit(ctx, attempt(e.id(t, "sk-n"), "m1"))
	if _, _, _, ok := pm.Advice(); ok {
		t.Error("advice without any limit")
	}
	h := http.Header{}
	Advice{Limit: 0, Remaining: 0, Reset: 90000, OK: true}.SetHeaders(h, DefaultNames)
	if len(h) != 0 {
		t.Errorf("invalid fields not dropped: %v", h)
	}
}

func TestPenalize(t *testing.T) {
	// A penalty slows a provider's own buckets: it applies to callers that
	// are counted (here a tenant), since unmetered traffic takes no decision.
	e := setup(t, "auth:\n  keys:\n    sk-p: {tenant: p}\n")
	who := e.id(t, "sk-p")
	e.c.Penalize("m1")
	_, ref := e.c.Admit(ctx, attempt(who, "m1"))
	if ref == nil || ref.Scope != ScopeProvider || ref.RetryAfter != 5 || !strings.Contains(ref.Message, "cooling down") {
		t.Fatalf("penalized = %+v", ref)
	}
	if _, ref := e.c.Admit(ctx, attempt(who, "m2")); ref != nil {
		t.Errorf("another provider penalized: %+v", ref)
	}
	e.clk.Advance(5 * time.Second)
	if _, ref := e.c.Admit(ctx, attempt(who, "m1")); ref != nil {
		t.Errorf("penalty outlived penalty_seconds: %+v", ref)
	}
	// A shorter stated wait shortens the penalty; a longer one does not
	// lengthen it.
	e.c.Penalize("m1", time.Second)
	if _, ref := e.c.Admit(ctx, attempt(who, "m1")); ref == nil || ref.RetryAfter != 1 {
		t.Errorf("stated 1 s: %+v", ref)
	}
	e.clk.Advance(time.Second)
	e.c.Penalize("m2", time.Minute)
	if _, ref := e.c.Admit(ctx, attempt(who, "m2")); ref == nil || ref.RetryAfter != 5 {
		t.Errorf("stated 60 s: %+v", ref)
	}
	e = setup(t, "limits: {penalty_seconds: 0}\n")
	e.c.Penalize("m1")
	if _, ref := e.c.Admit(ctx, attempt(nil, "m1")); ref != nil {
		t.Errorf("penalty_seconds 0 still penalizes: %+v", ref)
	}
}

func TestProviderSlot(t *testing.T) {
	e := &env{clk: clock.NewFake(t0), st: store.NewMemory()}
	e.c = New(e.st, e.clk, nil)
	e.c.Configure(parse(t, `providers:
  m1: {type: mock, max_concurrency: 1}
models: [{name: demo, providers: [{provider: m1}]}]
store: {backend: memory}
limits: {queue_timeout: 2}
`))
	pm, ref := e.c.Admit(ctx, attempt(nil, "m1"))
	if ref != nil {
		t.Fatal(ref)
	}
	type res struct {
		pm  *Permit
		ref *Refusal
	}
	ch := make(chan res, 1)
	go func() { pm, ref := e.c.Admit(ctx, attempt(nil, "m1")); ch <- res{pm, ref} }()
	waitFor(t, func() bool { return e.clk.Waiters() == 1 })
	e.clk.Advance(2 * time.Second)
	if got := <-ch; got.ref == nil || got.ref.Status != 503 || got.ref.Scope != ScopeProvider || got.ref.RetryAfter != 2 {
		t.Fatalf("saturated provider = %+v", got.ref)
	}
	go func() { pm, ref := e.c.Admit(ctx, attempt(nil, "m1")); ch <- res{pm, ref} }()
	waitFor(t, func() bool { return e.clk.Waiters() == 1 })
	pm.Keep()
	pm.Keep() // exactly once: the slot is released once
	got := <-ch
	if got.ref != nil {
		t.Fatalf("after Keep: %+v", got.ref)
	}
	if in, _ := e.c.gate("m1").Load(); in != 1 {
		t.Errorf("in use = %d", in)
	}
	got.pm.Settle(Usage{})
	got.pm.Fail()
	if in, _ := e.c.gate("m1").Load(); in != 0 {
		t.Errorf("in use = %d after settling", in)
	}
}

func TestReloadKeepsState(t *testing.T) {
	e := setup(t, "auth:\n  keys:\n    sk-a: {tenant: a, rpm: 2}\n")
	for range 2 {
		pm, ref := e.c.Admit(ctx, attempt(e.id(t, "sk-a"), "m1"))
		if ref != nil {
			t.Fatal(ref)
		}
		pm.Keep()
	}
	e.c.Configure(parse(t, baseYAML+"auth:\n  keys:\n    sk-a: {tenant: a, rpm: 2}\n"))
	if _, ref := e.c.Admit(ctx, attempt(e.id(t, "sk-a"), "m1")); ref == nil {
		t.Error("a reload refilled the bucket")
	}
	e.c.Configure(parse(t, baseYAML+"auth:\n  keys:\n    sk-a: {tenant: a, rpm: 4}\n"))
	pm, ref := e.c.Admit(ctx, attempt(e.id(t, "sk-a"), "m1"))
	if ref != nil {
		t.Fatalf("raised limit: %+v", ref)
	}
	if _, r, _, _ := pm.Advice(); r != 1 {
		t.Errorf("remaining after raise = %d, want 1", r)
	}
	u, _ := e.c.Usage(ctx, e.id(t, "sk-a"), UsageOptions{})
	if u.RequestsToday != 3 {
		t.Errorf("requests today = %d", u.RequestsToday)
	}
}

func TestTPMCorrectedBySettle(t *testing.T) {
	e := setup(t, "auth:\n  keys:\n    sk-a: {tenant: a, tpm: 10000}\n")
	id := e.id(t, "sk-a")
	pm, _ := e.c.Admit(ctx, attempt(id, "m1"))
	_, est, _, _ := pm.Advice()
	if 10000-est < 100 {
		t.Fatalf("estimate too small: remaining %d", est)
	}
	pm.Settle(Usage{Input: 30, Output: 20})
	u, _ := e.c.Usage(ctx, id, UsageOptions{})
	if got := u.Limits["tpm"].Remaining; got != 10000-50 {
		t.Errorf("tpm remaining after settle = %d, want %d", got, 10000-50)
	}
	if u.TokensToday != 50 {
		t.Errorf("tokens today = %d", u.TokensToday)
	}
	// Keep leaves the estimate in place.
	pm, _ = e.c.Admit(ctx, attempt(id, "m1"))
	_, rem, _, _ := pm.Advice()
	pm.Keep()
	if u, _ := e.c.Usage(ctx, id, UsageOptions{}); u.Limits["tpm"].Remaining != int64(rem) {
		t.Errorf("Keep changed the bucket: %d vs %d", u.Limits["tpm"].Remaining, rem)
	}
}

func rpmDebit(key string, n int64) limit.Debit {
	return limit.Debit{Key: key, Rate: limit.Rate{Limit: n, Window: time.Minute}}
}

// value reads a counter or gauge.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// series counts the series of a metric family in reg.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return len(f.Metric)
		}
	}
	return 0
}

func TestDailyLimit(t *testing.T) {
	e := setup(t, "auth:\n  keys:\n    sk-a: {tenant: a, daily_requests: 2}\n")
	id := e.id(t, "sk-a")
	for i := range 2 {
		pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
		if ref != nil {
			t.Fatal(ref)
		}
		if l, r, _, ok := pm.Advice(); !ok || l != 2 || r != 1-i {
			t.Errorf("advice %d = %d %d %v", i, l, r, ok)
		}
		pm.Settle(Usage{Input: 1, Output: 1})
		e.clk.Advance(time.Hour)
	}
	_, ref := e.c.Admit(ctx, attempt(id, "m2"))
	// The first attempt (minute of t0) leaves the rolling day 86400 s + up
	// to a minute after it; 2 h have passed.
	want := int(store.DailyExpiry(store.Minute(t0)).Sub(t0.Add(2*time.Hour)) / time.Second)
	if ref == nil || ref.Code != CodeDaily || ref.Scope != ScopeRequest || ref.RetryAfter != want || ref.Advice.Reset != int64(want) || ref.Advice.Limit != 2 {
		t.Fatalf("refusal = %+v, want Retry-After %d", ref, want)
	}
	e.clk.Advance(time.Duration(want) * time.Second)
	if _, ref := e.c.Admit(ctx, attempt(id, "m2")); ref != nil {
		t.Errorf("after the oldest left the day: %+v", ref)
	}
}
