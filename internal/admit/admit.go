package admit

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/limit"
	"switchboard/internal/spend"
	"switchboard/internal/store"
	"switchboard/internal/tenant"
)

// Usage is a terminal response's token usage (OpenAI convention: Input
// includes cache reads and writes, Output includes reasoning) and an
// optional provider-reported bill.
type Usage = spend.Usage

// AttemptInfo describes one provider attempt, right before its send.
type AttemptInfo struct {
	// Identity is the caller (nil when auth is off).
	Identity *tenant.Identity
	// Provider is the config name; ProviderType its type.
	Provider, ProviderType string
	// Model is the provider's model name; ClientModel what the client
	// asked for (informational).
	Model, ClientModel string
	// Endpoint: chat/completions, completions, responses, embeddings,
	// messages.
	Endpoint string
	// Body is the final body of the attempt.
	Body []byte
	// NoWait refuses at once when the provider's concurrency slots are
	// full instead of queueing up to limits.queue_timeout: a hedge that
	// has to queue would not answer sooner.
	NoWait bool
}

// counter kinds and scopes of a debit.
type debitMeta struct {
	kind  string // rpm, tpm
	scope string // key, tenant, global, provider
}

// own reports a debit of the caller's own counters (its key's or its
// tenant's), which limits.tenant_counting: request counts once per
// request.
func (m debitMeta) own() bool { return m.scope == "key" || m.scope == "tenant" }

// withoutOwn drops the caller's own debits (its request was counted).
func withoutOwn(ds []limit.Debit, ms []debitMeta) ([]limit.Debit, []debitMeta) {
	var outD []limit.Debit
	var outM []debitMeta
	for i, m := range ms {
		if !m.own() {
			outD, outM = append(outD, ds[i]), append(outM, m)
		}
	}
	return outD, outM
}

func tenantOf(id *tenant.Identity) string {
	if id == nil {
		return ""
	}
	return id.Tenant
}

// debits lists the rate buckets of an attempt in refusal order: RPM
// (key, tenant, global, provider), then TPM (same order). Unlimited
// buckets are left out, except the provider's RPM bucket, which carries
// its penalty. An issued key's own limits are buckets named by its id
// ("k:key-…"), a namespace apart from tenants' ("t:…"): the request must
// fit both, in the same all-or-nothing decision.
func debits(s *snapshot, id *tenant.Identity, p *providerInfo, tokens int64) ([]limit.Debit, []debitMeta) {
	// At most eight buckets: sized once, and a bucket's key is built only
	// when it is limited (most are not), so an admission allocates little.
	ds := make([]limit.Debit, 0, 8)
	ms := make([]debitMeta, 0, 8)
	add := func(kind, scope, prefix, name, suffix, group string, r limit.Rate, cost int64, always bool) {
		if r.Limited() || always {
			ds = append(ds, limit.Debit{Key: prefix + name + suffix, Group: group, Rate: r, Cost: cost})
			ms = append(ms, debitMeta{kind, scope})
		}
	}
	t := tenantOf(id)
	trpm, ttpm := rateOf(nil), rateOf(nil)
	krpm, ktpm := rateOf(nil), rateOf(nil)
	kid := ""
	if id != nil && t != "" {
		tr := s.tenantRates(id)
		trpm, ttpm = tr.rpm, tr.tpm
		kr := windowed(rates{rateOf(id.KeyRPM), rateOf(id.KeyTPM)}, s.cfg.Limits.Window)
		krpm, ktpm, kid = kr.rpm, kr.tpm, id.KeyID
	}
	add("rpm", "key", "k:", kid, ":rpm", "", krpm, 1, false)
	add("rpm", "tenant", "t:", t, ":rpm", "", trpm, 1, false)
	add("rpm", "global", "g:rpm", "", "", "", s.global.rpm, 1, false)
	add("rpm", "provider", p.rpmKey, "", "", p.group, p.rates.rpm, 1, true)
	add("tpm", "key", "k:", kid, ":tpm", "", ktpm, tokens, false)
	add("tpm", "tenant", "t:", t, ":tpm", "", ttpm, tokens, false)
	add("tpm", "global", "g:tpm", "", "", "", s.global.tpm, tokens, false)
	add("tpm", "provider", p.tpmKey, "", "", p.group, p.rates.tpm, tokens, false)
	return ds, ms
}

// newID is an attempt's ledger id: the admission time (Unix ns, big
// endian) then 8 random bytes, in hex. Ids that sort by time keep the
// SQLite ledger's primary-key inserts on its last index page, so a group
// commit of many admissions writes a few pages instead of one per id.
func newID(now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixNano()))
	_, _ = rand.Read(b[8:])
	return hex.EncodeToString(b[:])
}

// Admit decides one provider attempt, right before its send: first the
// provider's concurrency slot (providers.X.max_concurrency, bounded by
// limits.queue_timeout), then one all-or-nothing decision over the global,
// provider and tenant buckets, the tenant's daily count and the spend
// reservation. A refusal debits nothing. The Permit must be finished with
// exactly one of Settle, Keep or Fail, which also releases the slot.
func (c *Controller) Admit(ctx context.Context, ai AttemptInfo) (*Permit, *Refusal) {
	s := c.snap.Load()
	tally := tallyOf(ctx)
	// The request's usage row waits for a decision under way: an attempt
	// admitted after the request answered (a hedge's, the race already
	// decided) still adds its charge to the row.
	tally.begin()
	admitted := false
	defer func() {
		if !admitted {
			tally.ended()
		}
	}()
	if s == nil {
		tally.attempt()
		admitted = true
		return &Permit{c: c, noop: true, provider: ai.Provider, model: ai.Model, tally: tally}, nil
	}
	now := c.clk.Now()
	p := s.providers[ai.Provider]
	if p == nil {
		p = newProviderInfo(providerInfo{name: ai.Provider, typ: ai.ProviderType, rates: rates{rateOf(nil), rateOf(nil)}})
	}
	if ai.ProviderType == "" {
		ai.ProviderType = p.typ
	}
	id := ai.Identity
	t := tenantOf(id)
	// Nothing to count against and nobody to bill: no estimate, no ledger
	// write, no lock. Anonymous traffic without limits pays nothing here.
	if (id == nil || id.Anonymous) && !s.global.rpm.Limited() && !s.global.tpm.Limited() &&
		!p.rates.rpm.Limited() && !p.rates.tpm.Limited() && c.gate(ai.Provider) == nil {
		tally.attempt()
		admitted = true
		return &Permit{c: c, noop: true, provider: ai.Provider, model: ai.Model, tally: tally}, nil
	}

	entry, known := s.catalog.Lookup(ai.Provider, ai.Model)
	target := limit.Target{Type: ai.ProviderType, Hosted: p.hosted, FamilyCeiling: p.family.MaxOutput,
		NoOutput: ai.Endpoint == "embeddings"}
	if known && entry.MaxOutput != spend.Unknown {
		target.Known, target.ModelCeiling = true, entry.MaxOutput
	}
	target.FallbackCeiling = s.catalog.FallbackCeiling(ai.Provider, ai.ProviderType, ai.Body)
	est := limit.EstimateTokens(ai.Body, target)
	ds, metas := debits(s, id, p, est.Total)

	// An explicit 0 refuses before anything waits or is touched.
	for i, d := range ds {
		if d.Rate.Limit == 0 {
			return nil, c.rateRefusal(ai.Provider, metas[i], limit.Snapshot{Limit: 0, Wait: time.Minute}, t)
		}
	}
	daily := limit.Unlimited
	if id != nil && id.DailyRequests != nil {
		daily = *id.DailyRequests
	}
	if daily == 0 {
		return nil, c.dailyRefusal(ai.Provider, 0, 86400*time.Second)
	}

	hold := spend.Hold{Entry: entry, Media: false}
	var q spend.Quote
	a := &store.Admission{Now: now, ID: newID(now), Tenant: t, Provider: ai.Provider, Model: ai.Model, Debits: ds,
		DailyLimit: daily, EstTokens: est.Total, WindowSecs: config.DefaultBudgetWindowSecs, MaxRetained: s.maxRetained}
	if id != nil && id.BudgetWindowSecs > 0 {
		a.WindowSecs = id.BudgetWindowSecs
	}
	keyBudget := id.KeyLedgered() && id.KeyBudgetNano != nil
	if id.Budgeted() || keyBudget {
		q = s.catalog.Quote(spend.Request{Provider: ai.Provider, ProviderType: ai.ProviderType, Model: ai.Model,
			Endpoint: ai.Endpoint, Body: ai.Body})
		hold.Media = q.Media
		if !q.Priced && !id.AllowUnpriced {
			c.m.rejected.WithLabelValues(ai.Provider, ReasonUnpriceable).Inc()
			c.m.skipped.WithLabelValues(ai.Provider, ai.Model, CodeUnpriceable).Inc()
			return nil, &Refusal{Status: 400, Code: CodeUnpriceable, Type: "invalid_request_error", Param: "model",
				Scope: ScopeProvider, Message: fmt.Sprintf("the cost of this request to %s cannot be bounded under your budget: %s; "+
					"use a model with a known price and output limit, drop the unbounded control, or ask for budget_allow_unpriced",
					ai.Model, q.Reason)}
		}
	}
	keyHold := hold
	if id.Budgeted() {
		a.Budgeted, a.Budget = true, *id.BudgetNano
		hold.Budgeted = true
		if q.Priced {
			a.Hold = q.Amount
		} else {
			a.HoldRemaining, hold.Unpriced = true, true
		}
	}

	// The provider's slot, right before the decision and the send.
	releaseSlot := func() {}
	if g := c.gate(ai.Provider); g != nil {
		wait := s.queueTimeout
		if ai.NoWait {
			wait = 0
		}
		rel, waited, err := g.Acquire(ctx, wait)
		c.m.queueWait.WithLabelValues("provider").Observe(waited.Seconds())
		if err != nil {
			return nil, c.gateRefusal(err, ai.Provider, s.queueTimeout, ScopeProvider,
				fmt.Sprintf("provider %s is at its concurrency limit", ai.Provider))
		}
		releaseSlot = rel
		now = c.clk.Now()
		a.Now = now
	}

	if ctx.Err() != nil {
		releaseSlot()
		return nil, &Refusal{Status: 499, Code: CodeCanceled, Type: "request_canceled", Scope: ScopeRequest,
			Message: "the request was canceled before its attempt was admitted"}
	}
	// Under request counting the caller's own counters are debited by the
	// request's first admitted attempt only; the request's attempts decide
	// one at a time (a hedge's sides race), so exactly one counts.
	rq := requestOf(ctx)
	if s.cfg.Limits.TenantCounting == config.CountAttempts || id == nil || t == "" {
		rq = nil
	}
	counts := true
	if rq != nil {
		rq.mu.Lock()
		defer rq.mu.Unlock()
		if counts = !rq.counted; !counts {
			ds, metas = withoutOwn(ds, metas)
			a.Debits, a.NoCount, a.EstTokens = ds, true, 0
		}
	}
	// The key's own daily count and budget first, in its own ledger; a
	// refusal by the tenant's decision then releases it.
	var kp *Permit
	if id.KeyLedgered() {
		var ref *Refusal
		if kp, ref = c.admitKey(ctx, ai, a, q, keyHold, counts); ref != nil {
			releaseSlot()
			return nil, ref
		}
	}
	// Once begun, the decision completes even if the caller leaves.
	d, err := c.st.Admit(context.WithoutCancel(ctx), a)
	if kp != nil && (err != nil || d.Refused != store.Admitted) {
		kp.refused(counts)
	}
	if err != nil {
		releaseSlot()
		c.m.rejected.WithLabelValues(ai.Provider, ReasonOverloaded).Inc()
		return nil, &Refusal{Status: 503, Code: CodeOverloaded, Type: "server_error", Scope: ScopeRequest, RetryAfter: 5,
			Message: "admission state is unavailable; retry later"}
	}
	if a.Budgeted && (d.Refused == store.Admitted || d.Refused == store.RefusedBudget) {
		c.m.budgetUsed.WithLabelValues(id.Label()).Set(usedRatio(d.Spent, a.Budget))
	}
	switch d.Refused {
	case store.RefusedRate:
		releaseSlot()
		return nil, c.rateRefusal(ai.Provider, metas[d.Index], d.Snapshot, t)
	case store.RefusedDaily:
		releaseSlot()
		return nil, c.dailyRefusal(ai.Provider, daily, d.Wait)
	case store.RefusedBudget:
		releaseSlot()
		return nil, c.budgetRefusal(ctx, ai, a, d, q, tenantBudget(t))
	case store.RefusedFull:
		releaseSlot()
		return nil, c.fullRefusal(ai.Provider)
	}

	hold.Held = d.Held
	if hold.Unpriced {
		c.m.unpriced.WithLabelValues(ai.Provider, ai.Model).Inc()
	}
	c.m.admitted.WithLabelValues(ai.Provider).Inc()
	if d.Held > 0 {
		c.m.reserved.WithLabelValues(id.Label(), ai.Provider).Add(float64(d.Held))
	}
	pm := &Permit{c: c, key: kp, release: releaseSlot, id: a.ID, tenant: t, label: id.Label(), provider: ai.Provider,
		model: ai.Model, minute: d.Minute, windowSecs: a.WindowSecs, windowStart: d.WindowStart, recorded: d.Recorded,
		est: a.EstTokens, hold: hold, advice: advise(ds, metas, d), tally: tally}
	pm.inputBound, pm.outputBound = bounds(q, est)
	tally.attempt()
	admitted = true
	var own []limit.Debit // the caller's own TPM debits, charged
	for i, m := range metas {
		if m.kind != "tpm" {
			continue
		}
		charged := limit.Debit{Key: ds[i].Key, Group: ds[i].Group, Rate: ds[i].Rate, Cost: min(ds[i].Cost, ds[i].Rate.Limit)}
		if rq != nil && m.own() {
			own = append(own, charged)
		} else {
			pm.tpm = append(pm.tpm, charged)
		}
	}
	if rq != nil {
		pm.req = rq
		if kp != nil {
			kp.req, kp.keyShare = rq, true
		}
		if counts {
			rq.counted, rq.advice, rq.tenantTPM = true, pm.advice, own
			rq.tenant = ledgerShare{ledger: t, minute: d.Minute, windowSecs: a.WindowSecs, windowStart: d.WindowStart, est: est.Total}
			if kp != nil {
				rq.key = ledgerShare{ledger: kp.tenant, minute: kp.minute, windowSecs: kp.windowSecs, windowStart: kp.windowStart, est: kp.est}
			}
		} else if rq.advice.OK {
			// The advisory headers show the caller's own counter, which
			// this attempt did not touch: as its request's first saw it.
			pm.advice = rq.advice
		}
	}
	return pm, nil
}

// bounds are a reservation's input and output tokens (all candidates):
// the quote's when it priced the attempt, else the TPM estimate's.
func bounds(q spend.Quote, est limit.Estimate) (in, out int64) {
	if q.Priced {
		return q.InputBound, satMul(q.OutputBound, q.Candidates)
	}
	return est.Input, satMul(est.Output, max(est.Candidates, 1))
}

func satMul(a, b int64) int64 {
	if a > 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// fullRefusal is the 503 of a budgeted attempt when the live holds are
// at spend.max_retained_attempts.
func (c *Controller) fullRefusal(provider string) *Refusal {
	c.m.rejected.WithLabelValues(provider, ReasonOverloaded).Inc()
	return &Refusal{Status: 503, Code: CodeOverloaded, Type: "server_error", Scope: ScopeRequest, RetryAfter: 60,
		Message: "the spend ledger's live holds are at spend.max_retained_attempts (budgeted requests in flight); retry later"}
}

// tenantBudget names a tenant's budget in refusals.
func tenantBudget(tenant string) string { return fmt.Sprintf("the spend budget of tenant %q", tenant) }

// keyBudgetName names an issued key's own budget in refusals.
const keyBudgetName = "this key's own spend budget (not its tenant's)"

// budgetRefusal answers a decision refused by a budget; whose names the
// budget (the tenant's, or the key's own). A too-costly request's
// suggestion must fit every budget the request is held to: other, when
// set, is the other ledger's room (the tenant's, for a key's refusal).
func (c *Controller) budgetRefusal(ctx context.Context, ai AttemptInfo, a *store.Admission, d *store.Decision, q spend.Quote,
	whose string, other ...func() (int64, bool)) *Refusal {
	c.m.rejected.WithLabelValues(ai.Provider, ReasonBudget).Inc()
	ra := retryAfter(d.Wait)
	if r := c.heldByRunning(ctx, a, whose); r != nil {
		return r
	}
	if left := a.Budget - d.Spent; left > 0 && !a.HoldRemaining {
		c.m.skipped.WithLabelValues(ai.Provider, ai.Model, CodeRequestTooCostly).Inc()
		room := left
		for _, o := range other {
			if l, ok := o(); ok {
				room = min(room, l)
			}
		}
		return tooBig(a, q, left, room, ra, whose)
	}
	return &Refusal{Status: 429, Code: CodeBudget, Type: "insufficient_quota", Scope: ScopeRequest, RetryAfter: ra,
		Message: fmt.Sprintf("%s is exhausted for its current window (%s of %s USD used); it resets in %d s",
			whose, spend.FormatUSD(d.Spent), spend.FormatUSD(a.Budget), ra)}
}

// admitKey decides an issued key's own daily count and budget: the same
// admission as a tenant's, in the key's ledger (Identity.KeyLedger), with
// no rate buckets (those are in the tenant's decision). The permit is
// finished with the tenant's; a refusal says it is the key's own limit.
// counts: this attempt is its request's counted one (or requests are
// counted per attempt).
func (c *Controller) admitKey(ctx context.Context, ai AttemptInfo, ta *store.Admission, q spend.Quote, hold spend.Hold, counts bool) (*Permit, *Refusal) {
	id := ai.Identity
	a := &store.Admission{Now: ta.Now, ID: newID(ta.Now), Tenant: id.KeyLedger(), Provider: ai.Provider, Model: ai.Model,
		DailyLimit: limit.Unlimited, EstTokens: ta.EstTokens, WindowSecs: id.KeyBudgetWindowSecs, MaxRetained: ta.MaxRetained,
		NoCount: !counts}
	if id.KeyDailyRequests != nil {
		a.DailyLimit = *id.KeyDailyRequests
	}
	if id.KeyBudgetNano != nil {
		a.Budgeted, a.Budget = true, *id.KeyBudgetNano
		hold.Budgeted = true
		if q.Priced {
			a.Hold = q.Amount
		} else {
			a.HoldRemaining, hold.Unpriced = true, true
		}
	}
	own := func(r *Refusal) *Refusal {
		r.Message += " (this key's own limit, not its tenant's)"
		return r
	}
	if counts && a.DailyLimit == 0 {
		return nil, own(c.dailyRefusal(ai.Provider, 0, 86400*time.Second))
	}
	d, err := c.st.Admit(context.WithoutCancel(ctx), a)
	if err != nil {
		c.m.rejected.WithLabelValues(ai.Provider, ReasonOverloaded).Inc()
		return nil, &Refusal{Status: 503, Code: CodeOverloaded, Type: "server_error", Scope: ScopeRequest, RetryAfter: 5,
			Message: "admission state is unavailable; retry later"}
	}
	switch d.Refused {
	case store.RefusedDaily:
		return nil, own(c.dailyRefusal(ai.Provider, a.DailyLimit, d.Wait))
	case store.RefusedBudget:
		// What the tenant's budget has left bounds the suggestion too:
		// its decision comes after this one.
		tenantRoom := func() (int64, bool) {
			if !ta.Budgeted || ta.HoldRemaining {
				return 0, false
			}
			u, err := c.st.Usage(context.WithoutCancel(ctx), store.UsageQuery{Now: ta.Now, Tenant: ta.Tenant, WindowSecs: ta.WindowSecs})
			if err != nil {
				return 0, false
			}
			return ta.Budget - u.Reserved - u.Settled, true
		}
		return nil, c.budgetRefusal(ctx, ai, a, d, q, keyBudgetName, tenantRoom)
	case store.RefusedFull:
		return nil, c.fullRefusal(ai.Provider)
	}
	hold.Held = d.Held
	ib, ob := bounds(q, limit.Estimate{})
	return &Permit{c: c, quiet: true, id: a.ID, tenant: a.Tenant, label: id.Label(), provider: ai.Provider, model: ai.Model,
		minute: d.Minute, windowSecs: a.WindowSecs, windowStart: d.WindowStart, recorded: d.Recorded, est: a.EstTokens, hold: hold,
		inputBound: ib, outputBound: ob}, nil
}

// heldByRunning is the refusal of a request that would fit the budget if
// the reservations of requests still running were settled: they come back
// (all but what is actually spent) within a request's time, so the remedy
// is a short wait, not a smaller request or the window's end. It reads the
// window's split of reserved and settled, on this refusal path only; nil
// when the split cannot be read or the request does not fit anyway.
func (c *Controller) heldByRunning(ctx context.Context, a *store.Admission, whose string) *Refusal {
	if a.HoldRemaining || a.Hold > a.Budget {
		return nil
	}
	u, err := c.st.Usage(context.WithoutCancel(ctx), store.UsageQuery{Now: a.Now, Tenant: a.Tenant, WindowSecs: a.WindowSecs})
	if err != nil || u.Reserved <= 0 || a.Hold > a.Budget-u.Settled {
		return nil
	}
	return &Refusal{Status: 429, Code: CodeBudget, Type: "insufficient_quota", Scope: ScopeRequest, RetryAfter: 1,
		Message: fmt.Sprintf("%s USD of %s (%s USD) is held by requests still running (%s USD settled); "+
			"this request reserves up to %s USD and fits once they settle: retry in a moment",
			spend.FormatUSD(u.Reserved), whose, spend.FormatUSD(a.Budget), spend.FormatUSD(u.Settled), spend.FormatUSD(a.Hold))}
}

// tooBig is the refusal of a request whose own worst-case reservation
// exceeds what is left of the budget while some is left: lowering the
// output limit is the remedy, so it is a 400 without Retry-After (an SDK
// would retry a 429 for nothing). The output limit it suggests is the
// largest whose reservation fits room (what is left of every budget the
// request is held to); with a reasoning budget above it, that budget must
// come down too. It names waiting for the window only as the other way
// out, when the reservation fits the whole budget.
func tooBig(a *store.Admission, q spend.Quote, left, room int64, resetSecs int, whose string) *Refusal {
	msg := fmt.Sprintf("this request reserves up to %s USD (its input plus its output limit at the model's price), "+
		"more than the %s USD left of %s (%s USD)", spend.FormatUSD(a.Hold), spend.FormatUSD(left), whose,
		spend.FormatUSD(a.Budget))
	field := q.OutputField
	if field == "" {
		field = "max_tokens"
	}
	param := field
	var fit int64
	if q.OutputBound > 0 {
		fit = q.OutputFit(room)
		switch {
		case fit > 0 && q.Reasoning > fit:
			// The reasoning budget counts as output: a smaller limit alone
			// would reserve as much.
			msg += fmt.Sprintf("; its reasoning budget (%d tokens) is reserved as output: lower it, and %s, to %d or less",
				q.Reasoning, field, fit)
		case fit > 0 && q.Candidates > 1:
			msg += fmt.Sprintf("; its output limit is reserved for each of its %d candidates (n): lower n, or set %s to %d or less",
				q.Candidates, field, fit)
		case fit > 0:
			msg += fmt.Sprintf("; set %s to %d or less", field, fit)
		case q.Candidates > 1 && q.InputFits(room):
			// Not one output token for every candidate fits: n is what
			// to change, not the prompt.
			msg += fmt.Sprintf("; its output limit is reserved for each of its %d candidates (n): lower n", q.Candidates)
			param = "n"
		default:
			msg += "; even its input alone does not fit: shorten the prompt"
		}
	}
	if a.Hold <= a.Budget {
		msg += fmt.Sprintf(", or wait %d s for the budget window to reset", resetSecs)
	}
	return &Refusal{Status: 400, Code: CodeRequestTooCostly, Type: "invalid_request_error", Param: param,
		Scope: ScopeProvider, Message: msg, Fit: fit}
}

// usedRatio is spent/budget; a zero budget is always fully used.
func usedRatio(spent, budget int64) float64 {
	if budget <= 0 {
		return 1
	}
	return float64(spent) / float64(budget)
}

// rateRefusal is the 429 of a refused bucket.
func (c *Controller) rateRefusal(provider string, m debitMeta, sn limit.Snapshot, tenantName string) *Refusal {
	ra := retryAfter(sn.Wait)
	r := &Refusal{Status: 429, Code: CodeRateLimit, Type: "rate_limit_error", RetryAfter: ra, Scope: ScopeRequest}
	if m.scope != "provider" {
		// A provider's bucket is the gateway's business: the headers show
		// the caller's own counters (or the gateway's) only.
		r.Advice = Advice{Limit: sn.Limit, Remaining: 0, Reset: int64(ra), OK: true}
	}
	what := "requests per minute"
	if m.kind == "tpm" {
		r.Code, what = CodeTokenRate, "tokens per minute"
	}
	reason := ReasonRateLimited
	switch m.scope {
	case "key":
		reason = ReasonTenantQuota
		r.Message = fmt.Sprintf("this key's own rate limit is reached (%s; the key's limit, not its tenant's); retry in %d s", what, ra)
	case "tenant":
		reason = ReasonTenantQuota
		r.Message = fmt.Sprintf("rate limit of this key reached (%s); retry in %d s", what, ra)
	case "global":
		r.Message = fmt.Sprintf("the gateway's rate limit is reached (%s); retry in %d s", what, ra)
	case "provider":
		r.Scope = ScopeProvider
		r.Message = fmt.Sprintf("provider %s is at its rate limit (%s); retry in %d s", provider, what, ra)
		if sn.Penalized {
			r.Message = fmt.Sprintf("provider %s is cooling down after an upstream 429; retry in %d s", provider, ra)
		}
	}
	if sn.Limit == 0 {
		r.Message = fmt.Sprintf("the %s limit of %s is 0: every request is denied", what, map[string]string{
			"key": "this key (its own limit)", "tenant": "this key", "global": "the gateway", "provider": "provider " + provider}[m.scope])
	}
	c.m.rejected.WithLabelValues(provider, reason).Inc()
	return r
}

func (c *Controller) dailyRefusal(provider string, limit int64, wait time.Duration) *Refusal {
	c.m.rejected.WithLabelValues(provider, ReasonTenantQuota).Inc()
	// The day is counted in minutes, so its oldest request may leave up
	// to a minute past 86400 s; a client waits at most a day, and may
	// find a few seconds more to wait then.
	ra := min(retryAfter(wait), 86400)
	return &Refusal{Status: 429, Code: CodeDaily, Type: "rate_limit_error", RetryAfter: ra, Scope: ScopeRequest,
		Advice:  Advice{Limit: limit, Remaining: 0, Reset: int64(ra), OK: true},
		Message: fmt.Sprintf("the daily request limit of this key is reached (rolling 24 h); retry in %d s", ra)}
}

// advise selects the advisory counter of an admission among the caller's
// own counters and the gateway's (never a provider's, which the gateway
// keeps to itself): the tightest limited RPM counter, else the tightest
// TPM one, else the daily count.
func advise(ds []limit.Debit, ms []debitMeta, d *store.Decision) Advice {
	for _, kind := range []string{"rpm", "tpm"} {
		best := -1
		for i, m := range ms {
			if m.kind != kind || m.scope == "provider" || !ds[i].Rate.Limited() || i >= len(d.Snapshots) {
				continue
			}
			if best < 0 || d.Snapshots[i].Remaining < d.Snapshots[best].Remaining {
				best = i
			}
		}
		if best >= 0 {
			sn := d.Snapshots[best]
			return Advice{Limit: sn.Limit, Remaining: sn.Remaining, Reset: resetSecs(sn.Reset, 60), OK: true}
		}
	}
	if d.Daily.Limit > 0 {
		return Advice{Limit: d.Daily.Limit, Remaining: d.Daily.Remaining, Reset: resetSecs(d.Daily.Reset, 86400), OK: true}
	}
	return Advice{}
}

// resetSecs is min(window, max(1, ceil(d))).
func resetSecs(d time.Duration, window int64) int64 {
	return min(window, max(1, int64(math.Ceil(d.Seconds()))))
}
