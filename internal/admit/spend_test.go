package admit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/spend"
	"switchboard/internal/store"
	"switchboard/internal/tenant"
)

// Known prices for the mock model: 10 USD/M input, 20 USD/M output, so
// 10,000 nano-USD per input token and 20,000 per output token.
const pricing = `pricing:
  m1: {demo: {input: 10, output: 20, context: 100000, max_output: 4096}}
  m2: {demo: {input: 10, output: 20, context: 100000, max_output: 4096}}
`

func budgetKey(usd string, extra string) string {
	return "auth:\n  keys:\n    sk-b: {tenant: b, budget_usd: " + usd + extra + "}\n"
}

// reservation is the arithmetic of one chatBody attempt: bytes of the body
// plus the base and one message's allowance as input, max_tokens as
// output.
func reservation() int64 {
	in := int64(len(chatBody)) + spend.BaseAllowance + spend.PerMessageAllowance
	return in*10_000 + 100*20_000
}

func spendOf(t *testing.T, e *env, id *tenant.Identity) *SpendView {
	t.Helper()
	u, err := e.c.Usage(ctx, id, UsageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.Spend
}

// 500 concurrent budgeted attempts against 1 USD: settled plus held never
// exceeds the budget, and the number admitted is what the arithmetic
// allows.
func TestBudgetUnderConcurrency(t *testing.T) {
	e := setup(t, pricing+budgetKey("1", ""))
	id := e.id(t, "sk-b")
	r := reservation()
	const budget = int64(1e9)
	want := budget / r
	if want >= 500 || want < 100 {
		t.Fatalf("test needs a reservation between 2 and 10 mUSD, got %d", r)
	}
	var admitted, settled atomic.Int64
	var permits sync.Map
	var wg sync.WaitGroup
	for i := range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
			if ref != nil {
				// Less is left than one reservation: the request's own
				// size is named (400, no Retry-After), unless none is left.
				// Or, while others' holds are still unsettled, a short wait.
				tooBig := ref.Code == CodeRequestTooCostly && ref.Status == 400 && ref.RetryAfter == 0
				usedUp := ref.Code == CodeBudget && ref.Status == 429 && ref.Scope == ScopeRequest && ref.RetryAfter == 86400-12*3600-30
				held := ref.Code == CodeBudget && ref.Status == 429 && ref.RetryAfter == 1 && strings.Contains(ref.Message, "still running")
				if !tooBig && !usedUp && !held {
					t.Errorf("refusal = %+v", ref)
				}
				return
			}
			admitted.Add(1)
			if pm.Reserved() != r {
				t.Errorf("reserved %d, want %d", pm.Reserved(), r)
			}
			permits.Store(i, pm)
		}()
	}
	wg.Wait()
	if admitted.Load() != want {
		t.Fatalf("admitted %d, want %d = floor(1e9 / %d)", admitted.Load(), want, r)
	}
	sv := spendOf(t, e, id)
	if sv.ReservedNano != want*r || sv.SettledNano != 0 || *sv.RemainingNano != budget-want*r {
		t.Errorf("spend = %+v", sv)
	}
	// Settle every other attempt at its real (smaller) cost, keep the rest;
	// concurrently, new attempts take what settlement frees.
	var more atomic.Int64
	i := 0
	permits.Range(func(_, v any) bool {
		pm := v.(*Permit)
		i++
		wg.Add(2)
		go func(settle bool) {
			defer wg.Done()
			if settle {
				pm.Settle(Usage{Input: 20, Output: 30}) // 200,000 + 600,000 n$
				settled.Add(1)
			} else {
				pm.Keep()
			}
		}(i%2 == 0)
		go func() {
			defer wg.Done()
			if pm, ref := e.c.Admit(ctx, attempt(id, "m2")); ref == nil {
				more.Add(1)
				pm.Keep()
			}
		}()
		return true
	})
	wg.Wait()
	sv = spendOf(t, e, id)
	total := sv.ReservedNano + sv.SettledNano
	if total > budget {
		t.Fatalf("settled %d + held %d exceeds the budget", sv.SettledNano, sv.ReservedNano)
	}
	wantSettled := settled.Load() * 800_000
	wantHeld := (want - settled.Load() + more.Load()) * r
	if sv.SettledNano != wantSettled || sv.ReservedNano != wantHeld {
		t.Errorf("spend = settled %d held %d, want %d and %d", sv.SettledNano, sv.ReservedNano, wantSettled, wantHeld)
	}
	// No more room than one reservation.
	if budget-total >= r {
		if _, ref := e.c.Admit(ctx, attempt(id, "m1")); ref != nil {
			t.Errorf("room for one more, yet refused: %+v", ref)
		}
	} else if _, ref := e.c.Admit(ctx, attempt(id, "m1")); ref == nil {
		t.Errorf("admitted past the budget")
	}
}

func TestKeepFailSettle(t *testing.T) {
	e := setup(t, pricing+budgetKey("10", ""))
	id := e.id(t, "sk-b")
	r := reservation()

	pm, _ := e.c.Admit(ctx, attempt(id, "m1"))
	pm.Keep()
	pm.Settle(Usage{Input: 1}) // no-op: exactly once
	if sv := spendOf(t, e, id); sv.ReservedNano != r || sv.SettledNano != 0 {
		t.Errorf("after Keep: %+v", sv)
	}

	pm, _ = e.c.Admit(ctx, attempt(id, "m1"))
	pm.Fail()
	if sv := spendOf(t, e, id); sv.ReservedNano != r || sv.SettledNano != 0 {
		t.Errorf("after Fail: %+v", sv)
	}

	pm, _ = e.c.Admit(ctx, attempt(id, "m1"))
	pm.Partial(Usage{Input: 10, Output: 10}) // below the reservation: no change
	if pm.Reserved() != r {
		t.Errorf("partial lowered the hold: %d", pm.Reserved())
	}
	bill := int64(123)
	pm.Settle(Usage{Input: 10, Output: 10, CostNanoUSD: &bill})
	if sv := spendOf(t, e, id); sv.ReservedNano != r || sv.SettledNano != 123 || sv.SettledUSD != "0.000000123" {
		t.Errorf("after Settle with a bill: %+v", sv)
	}
	if v := value(e.c.m.settled.WithLabelValues("b", "m1")); v != 123 {
		t.Errorf("settled metric = %v", v)
	}
	if v := value(e.c.m.reserved.WithLabelValues("b", "m1")); v != float64(r) {
		t.Errorf("reserved metric = %v, want %d", v, r)
	}
}

// A cancelled stream keeps its reservation across a restart (SQLite); the
// settled spend survives too, and the budget keeps counting it.
func TestRestartKeepsSpend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switchboard.db")
	st, err := store.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	e := setupWith(t, st, clk, pricing+budgetKey("0.01", ""))
	id := e.id(t, "sk-b")
	r := reservation()
	streamed, _ := e.c.Admit(ctx, attempt(id, "m1"))
	streamed.Keep() // the client went away mid-stream
	done, _ := e.c.Admit(ctx, attempt(id, "m1"))
	done.Settle(Usage{Input: 100, Output: 100}) // 3,000,000 n$
	st.Close()

	st, err = store.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e = setupWith(t, st, clk, pricing+budgetKey("0.01", ""))
	id = e.id(t, "sk-b")
	sv := spendOf(t, e, id)
	if sv.ReservedNano != r || sv.SettledNano != 3_000_000 {
		t.Fatalf("after restart: %+v", sv)
	}
	// 10,000,000 budget: r + 3,000,000 used; one more fits only if r fits.
	fits := 10_000_000-r-3_000_000 >= r
	_, ref := e.c.Admit(ctx, attempt(id, "m1"))
	if (ref == nil) != fits {
		t.Errorf("after restart, admission = %+v, want fits=%v", ref, fits)
	}
	u, _ := e.c.Usage(ctx, id, UsageOptions{})
	if u.RequestsToday < 2 {
		t.Errorf("requests today forgot the restart: %d", u.RequestsToday)
	}
}

// The unpriceable rules through the controller.
func TestUnpriceableUnderBudget(t *testing.T) {
	e := setup(t, "auth:\n  keys:\n    sk-b: {tenant: b, budget_usd: 1}\n    sk-u: {tenant: u, budget_usd: 1, budget_allow_unpriced: true}\n    sk-n: {tenant: n}\n")
	tests := []struct {
		name, key, model, body string
		status                 int
		code                   string
	}{
		{"unknown price", "sk-b", "demo", chatBody, 400, CodeUnpriceable},
		{"hosted tool on a priced model", "sk-b", "gpt-4o", `{"messages":[],"max_tokens":5,"tools":[{"type":"web_search"}]}`, 400, CodeUnpriceable},
		{"no budget: no rule", "sk-n", "demo", chatBody, 0, ""},
		{"allowed: holds the balance", "sk-u", "demo", chatBody, 0, ""},
		{"allowed, nothing left", "sk-u", "demo", chatBody, 429, CodeBudget},
		{"allowed, priced requests reserve normally", "sk-b", "gpt-4o", `{"messages":[],"max_tokens":5}`, 0, ""},
	}
	for _, tt := range tests {
		ai := attempt(e.id(t, tt.key), "m1")
		ai.Model, ai.Body = tt.model, []byte(tt.body)
		pm, ref := e.c.Admit(ctx, ai)
		if tt.status == 0 {
			if ref != nil {
				t.Errorf("%s: refused %+v", tt.name, ref)
			}
			continue
		}
		if ref == nil || ref.Status != tt.status || ref.Code != tt.code {
			t.Errorf("%s: got %+v, permit %v", tt.name, ref, pm)
			continue
		}
		if tt.status == 400 && (ref.Param != "model" || ref.Scope != ScopeProvider || ref.RetryAfter != 0) {
			t.Errorf("%s: refusal %+v", tt.name, ref)
		}
	}
	if sv := spendOf(t, e, e.id(t, "sk-u")); sv.ReservedNano != 1e9 {
		t.Errorf("unpriced hold = %+v", sv)
	}
	if v := value(e.c.m.unpriced.WithLabelValues("m1", "demo")); v != 1 {
		t.Errorf("unpriced_under_cap = %v", v)
	}
	if v := value(e.c.m.rejected.WithLabelValues("m1", ReasonUnpriceable)); v != 2 {
		t.Errorf("unpriceable rejections = %v", v)
	}
}

// An unpriced hold is released only by a stated cost.
func TestUnpricedSettlement(t *testing.T) {
	e := setup(t, "auth:\n  keys:\n    sk-u: {tenant: u, budget_usd: 1, budget_allow_unpriced: true}\n")
	id := e.id(t, "sk-u")
	pm, _ := e.c.Admit(ctx, attempt(id, "m1"))
	pm.Settle(Usage{Input: 10, Output: 10}) // no price: the hold stays
	if sv := spendOf(t, e, id); sv.ReservedNano != 1e9 {
		t.Errorf("unpriced hold released without a cost: %+v", sv)
	}
	e2 := setup(t, "auth:\n  keys:\n    sk-u: {tenant: u, budget_usd: 1, budget_allow_unpriced: true}\n")
	id = e2.id(t, "sk-u")
	pm, _ = e2.c.Admit(ctx, attempt(id, "m1"))
	bill := int64(5_000)
	pm.Settle(Usage{Input: 10, Output: 10, CostNanoUSD: &bill})
	if sv := spendOf(t, e2, id); sv.ReservedNano != 0 || sv.SettledNano != 5000 {
		t.Errorf("billed unpriced: %+v", sv)
	}
}

// Tumbling windows: the window is chosen at admission, a refusal waits to
// its end, and the next window starts empty while the old keeps its hold.
func TestWindowRollover(t *testing.T) {
	e := setup(t, pricing+budgetKey("0.01", ", budget_window_secs: 3600"))
	id := e.id(t, "sk-b")
	var held []*Permit
	for {
		pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
		if ref != nil {
			usedUp := ref.Code == CodeBudget && ref.RetryAfter == 3600-30
			tooBig := ref.Code == CodeRequestTooCostly && strings.Contains(ref.Message, "wait 3570 s")
			// The holds are unsettled, so this is the short wait for them.
			held := ref.Code == CodeBudget && ref.RetryAfter == 1 && strings.Contains(ref.Message, "still running")
			if !usedUp && !tooBig && !held {
				t.Fatalf("refusal = %+v, want budget_exceeded with 3570 s or held by running requests", ref)
			}
			break
		}
		held = append(held, pm)
	}
	if len(held) != int(10_000_000/reservation()) || len(held) < 2 {
		t.Fatalf("admitted %d", len(held))
	}
	e.clk.Advance(3570 * time.Second) // the next window
	pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
	if ref != nil {
		t.Fatalf("new window refused: %+v", ref)
	}
	sv := spendOf(t, e, id)
	if sv.ReservedNano != reservation() || sv.WindowStart != t0.Unix()-30+3600 {
		t.Errorf("new window = %+v", sv)
	}
	// Settling an old attempt now changes its own window, not this one.
	held[0].Settle(Usage{Input: 1, Output: 1})
	pm.Keep()
	if sv := spendOf(t, e, id); sv.ReservedNano != reservation() || sv.SettledNano != 0 {
		t.Errorf("old settlement leaked into the new window: %+v", sv)
	}
	old, _ := e.st.Usage(ctx, store.UsageQuery{Now: t0, Tenant: "b", WindowSecs: 3600})
	if old.Settled != 30_000 || old.Reserved != int64(len(held)-1)*reservation() {
		t.Errorf("old window = %+v", old)
	}
}

func TestBudgetZeroFreezes(t *testing.T) {
	e := setup(t, "pricing:\n  m1: {demo: {input: 0, output: 0, max_output: 10}}\n"+budgetKey("0", ""))
	if _, ref := e.c.Admit(ctx, attempt(e.id(t, "sk-b"), "m1")); ref == nil || ref.Code != CodeBudget {
		t.Errorf("budget 0 with a free model = %+v", ref)
	}
}

// switchboard_budget_used_ratio follows the store's spent/budget at each
// admission decision, refusals included, for the nearly-spent alert.
func TestBudgetUsedRatio(t *testing.T) {
	r := reservation()
	// A budget of exactly three reservations: two admitted, then the third
	// fills it, the fourth is refused at a full budget.
	budget := fmt.Sprintf("%d.%09d", 3*r/1e9, 3*r%1e9)
	e := setup(t, pricing+budgetKey(budget, ""))
	id := e.id(t, "sk-b")
	for i, want := range []float64{1.0 / 3, 2.0 / 3, 1} {
		if _, ref := e.c.Admit(ctx, attempt(id, "m1")); ref != nil {
			t.Fatalf("attempt %d refused: %v", i, ref)
		}
		if v := value(e.c.m.budgetUsed.WithLabelValues("b")); v < want-1e-9 || v > want+1e-9 {
			t.Errorf("after admission %d: ratio %v, want %v", i+1, v, want)
		}
	}
	if _, ref := e.c.Admit(ctx, attempt(id, "m1")); ref == nil || ref.Code != CodeBudget {
		t.Fatalf("fourth attempt = %v, want budget_exceeded", ref)
	}
	if v := value(e.c.m.budgetUsed.WithLabelValues("b")); v != 1 {
		t.Errorf("after the refusal: ratio %v, want 1", v)
	}
}

// spend.max_retained_attempts bounds the live holds: budgeted attempts in
// flight. Settled attempts need none, so a long run of them never fills
// it; when it is full a budgeted attempt is refused (503), an unbudgeted
// one is not.
func TestLiveHoldsFull(t *testing.T) {
	e := setup(t, pricing+budgetKey("1", "")+"spend: {max_retained_attempts: 2}\n")
	id := e.id(t, "sk-b")
	for range 50 {
		pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
		if ref != nil {
			t.Fatalf("settled attempts filled the ledger: %+v", ref)
		}
		pm.Settle(Usage{Input: 1})
	}
	var open []*Permit
	for range 2 {
		pm, ref := e.c.Admit(ctx, attempt(id, "m1"))
		if ref != nil {
			t.Fatal(ref)
		}
		open = append(open, pm)
	}
	before := spendOf(t, e, id)
	_, ref := e.c.Admit(ctx, attempt(id, "m1"))
	if ref == nil || ref.Status != 503 || ref.Code != CodeOverloaded || ref.Scope != ScopeRequest ||
		!strings.Contains(ref.Message, "spend.max_retained_attempts") {
		t.Fatalf("full = %+v", ref)
	}
	if sv := spendOf(t, e, id); sv.ReservedNano != before.ReservedNano {
		t.Errorf("a full ledger debited: %+v", sv)
	}
	// Unbudgeted traffic is not refused by a full ledger.
	if _, ref := e.c.Admit(ctx, attempt(nil, "m1")); ref != nil {
		t.Errorf("unbudgeted refused: %+v", ref)
	}
	// An attempt that ends, however it ends, frees its live hold.
	open[0].Keep()
	if _, ref := e.c.Admit(ctx, attempt(id, "m1")); ref != nil {
		t.Errorf("no room once a live hold ended: %+v", ref)
	}
}

func TestUsageView(t *testing.T) {
	var provs strings.Builder
	provs.WriteString("providers:\n")
	for i := range 40 {
		fmt.Fprintf(&provs, "  p%02d: {type: mock, rpm: %d}\n", i, 10+i)
	}
	provs.WriteString("  free: {type: mock}\n")
	e := &env{clk: clock.NewFake(t0), st: store.NewMemory()}
	e.c = New(e.st, e.clk, nil)
	if err := e.c.Configure(parse(t, provs.String()+`models: [{name: demo, providers: [{provider: p00}]}]
store: {backend: memory}
pricing:
  p00: {demo: {input: 1, output: 2, max_output: 4096}}
auth:
  keys:
    sk-a: {tenant: a, rpm: 5, tpm: 9000, daily_requests: 100, budget_usd: 2.5}
`)); err != nil {
		t.Fatal(err)
	}
	id := e.id(t, "sk-a")
	pm, _ := e.c.Admit(ctx, attempt(id, "p00"))
	pm.Settle(Usage{Input: 10, Output: 20})
	all := UsageOptions{Advisory: true, Providers: true}
	u1, err := e.c.Usage(ctx, id, all)
	if err != nil {
		t.Fatal(err)
	}
	u2, _ := e.c.Usage(ctx, id, all) // a read never reserves
	b1, _ := json.Marshal(u1)
	b2, _ := json.Marshal(u2)
	if !bytes.Equal(b1, b2) {
		t.Errorf("a read changed the counters:\n%s\n%s", b1, b2)
	}
	// The operator's view: each provider's own bucket, limited ones only.
	if len(u1.ProviderLimits) != MaxUsageProviders || u1.ProviderLimits["p00"] != (Counter{Limit: 10, Remaining: 9, Reset: 6}) {
		t.Errorf("provider_limits = %d entries, p00 %+v", len(u1.ProviderLimits), u1.ProviderLimits["p00"])
	}
	if _, ok := u1.ProviderLimits["free"]; ok {
		t.Error("an unlimited provider listed")
	}
	// The caller's view (advisory on): its own rpm counter on each of at
	// most 32 providers.
	if len(u1.RateLimits) != MaxUsageProviders || u1.RateLimits["free"] != u1.Limits["rpm"] || u1.RateLimits["p00"] != (Counter{Limit: 5, Remaining: 4, Reset: 12}) {
		t.Errorf("rate_limits = %d entries, free %+v p00 %+v", len(u1.RateLimits), u1.RateLimits["free"], u1.RateLimits["p00"])
	}
	// Advisory off and not an operator: neither map.
	if u, _ := e.c.Usage(ctx, id, UsageOptions{}); u.RateLimits != nil || u.ProviderLimits != nil {
		t.Errorf("plain view carries %v %v", u.RateLimits, u.ProviderLimits)
	}
	if u1.Limits["rpm"].Remaining != 4 || u1.Limits["daily_requests"] != (Counter{Limit: 100, Remaining: 99, Reset: 86400}) ||
		u1.RequestsToday != 1 || u1.TokensToday != 30 || u1.Limits["tpm"].Remaining != 9000-30 {
		t.Errorf("own counters = %+v", u1)
	}
	var doc map[string]any
	json.Unmarshal(b1, &doc)
	sp := doc["spend"].(map[string]any)
	if sp["settled_usd"] != 0.00005 || sp["budget_usd"] != 2.5 || sp["remaining_nano_usd"] != 2.5e9-50000 {
		t.Errorf("spend JSON = %s", b1)
	}
	if !strings.Contains(string(b1), `"settled_usd":0.00005,`) || !strings.Contains(string(b1), `"rate_limits":{`) {
		t.Errorf("JSON = %s", b1)
	}
}

func TestCostUSD(t *testing.T) {
	e := setup(t, pricing)
	if c := e.c.CostUSD("m1", "demo", Usage{Input: 1000, Output: 500}); c == nil || *c != 0.02 {
		t.Errorf("cost = %v", c)
	}
	if c := e.c.CostUSD("m1", "unknown-model", Usage{Input: 1000}); c != nil {
		t.Errorf("unknown model cost = %v, want nil", *c)
	}
	if c := e.c.CostUSD("x", "gpt-4o-mini", Usage{Input: 1_000_000}); c == nil || *c != 0.15 {
		t.Errorf("catalog cost = %v", c)
	}
	bill := int64(1_500_000_000)
	if c := e.c.CostUSD("m1", "unknown-model", Usage{CostNanoUSD: &bill}); c == nil || *c != 1.5 {
		t.Errorf("billed cost = %v", c)
	}
	var buf bytes.Buffer
	if err := WritePrices(&buf, parse(t, baseYAML+pricing)); err != nil || !strings.Contains(buf.String(), "config: pricing.m1.demo") {
		t.Errorf("prices:\n%s", buf.String())
	}
	if rows := e.c.Prices(); rows[0].Provider != "m1" {
		t.Errorf("rows[0] = %+v", rows[0])
	}
}

func TestAdvisoryEnabled(t *testing.T) {
	tests := []struct {
		v         string
		on, valid bool
	}{
		{"true", true, true}, {" YES ", true, true}, {"1", true, true}, {"On", true, true},
		{"", false, true}, {"false", false, true}, {"0", false, true}, {"no", false, true}, {" OFF", false, true},
		{"enabled", false, false}, {"2", false, false},
	}
	for _, tt := range tests {
		if on, valid := ParseAdvisory(tt.v); on != tt.on || valid != tt.valid {
			t.Errorf("ParseAdvisory(%q) = %v %v", tt.v, on, valid)
		}
	}
	warnOnce = new(sync.Once) // a fresh process, as far as the warning goes
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	lookup := func(v string) func(string) (string, bool) {
		return func(string) (string, bool) { return v, true }
	}
	for range 3 {
		if advisoryFromEnv(lookup("s3cr3t-value"), log) {
			t.Error("an invalid value turned headers on")
		}
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || strings.Contains(logs.String(), "s3cr3t") {
		t.Errorf("warnings: %q", logs.String())
	}
	if !advisoryFromEnv(lookup("TRUE"), log) {
		t.Error("TRUE not on")
	}
	if !AdvisoryEnabled(parse(t, baseYAML+"limits: {advisory_headers: true}\n")) {
		t.Error("limits.advisory_headers ignored")
	}
	t.Setenv(EnvAdvisory, "")
	if AdvisoryEnabled(parse(t, baseYAML)) {
		t.Error("on by default")
	}
}

// A request refused only because requests still running hold part of the
// budget is told to retry in a moment (429, Retry-After 1), not to shorten
// its prompt or wait for the window: their holds come back as they settle.
func TestBudgetHeldByRunningRequests(t *testing.T) {
	for _, tt := range stores()[:2] { // memory and SQLite
		t.Run(tt.name, func(t *testing.T) {
			r := reservation()
			// Room for one reservation and a half: the second request fits
			// the budget, but not beside the first one's hold.
			usd := fmt.Sprintf("%.9f", float64(r*3/2)/1e9)
			e := setupWith(t, tt.store(t), clock.NewFake(t0), pricing+budgetKey(usd, ""))
			id := e.id(t, "sk-b")
			first, ref := e.c.Admit(ctx, attempt(id, "m1"))
			if ref != nil {
				t.Fatalf("first refused: %+v", ref)
			}
			_, ref = e.c.Admit(ctx, attempt(id, "m1"))
			if ref == nil || ref.Status != 429 || ref.Code != CodeBudget || ref.RetryAfter != 1 || !strings.Contains(ref.Message, "held by requests still running") {
				t.Fatalf("second = %+v, want 429 budget_exceeded, Retry-After 1, held by running requests", ref)
			}
			first.Settle(Usage{Input: 10, Output: 10})
			second, ref := e.c.Admit(ctx, attempt(id, "m1"))
			if ref != nil {
				t.Fatalf("after the first settled: %+v", ref)
			}
			second.Settle(Usage{Input: 10, Output: 100})
			// What is settled now leaves less than a reservation: that
			// request is too big (400), as before.
			_, ref = e.c.Admit(ctx, attempt(id, "m1"))
			if ref == nil || ref.Status != 400 || ref.Code != CodeRequestTooCostly {
				t.Fatalf("third = %+v, want 400 request_exceeds_budget", ref)
			}
		})
	}
}
