package admit

import (
	"context"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/limit"
	"switchboard/internal/store"
	"switchboard/internal/tenant"
)

// ReplayProvider names an Idempotency-Key replay in the ledger and in the
// refusal metrics: no provider is called.
const ReplayProvider = "(replay)"

// AdmitReplay decides an answer replayed from an Idempotency-Key for the
// caller id (who may not be the key that stored it: replays are shared
// within a tenant). A replay calls no provider and costs nothing, but it
// is a request of that key: it must fit the key's and its tenant's request
// limits (RPM, the daily count, an explicit 0 for RPM or TPM), and it is
// counted in them. Provider and global buckets, which protect upstreams,
// and budgets are not touched. nil admits (and has counted it).
func (c *Controller) AdmitReplay(ctx context.Context, id *tenant.Identity, model string) *Refusal {
	s := c.snap.Load()
	if s == nil || id == nil || id.Tenant == "" && id.KeyRPM == nil && id.KeyTPM == nil && !id.KeyLedgered() &&
		id.RPM == nil && id.TPM == nil && id.DailyRequests == nil {
		return nil // nothing to count against
	}
	now := c.clk.Now()
	t := tenantOf(id)
	tr := s.tenantRates(id)
	kr := windowed(rates{rateOf(id.KeyRPM), rateOf(id.KeyTPM)}, s.cfg.Limits.Window)
	var ds []limit.Debit
	var metas []debitMeta
	add := func(kind, scope, key string, r limit.Rate, cost int64) {
		if r.Limited() {
			ds = append(ds, limit.Debit{Key: key, Rate: r, Cost: cost})
			metas = append(metas, debitMeta{kind, scope})
		}
	}
	add("rpm", "key", "k:"+id.KeyID+":rpm", kr.rpm, 1)
	add("rpm", "tenant", "t:"+t+":rpm", tr.rpm, 1)
	add("tpm", "key", "k:"+id.KeyID+":tpm", kr.tpm, 0)
	add("tpm", "tenant", "t:"+t+":tpm", tr.tpm, 0)
	for i, d := range ds {
		if d.Rate.Limit == 0 {
			return c.rateRefusal(ReplayProvider, metas[i], limit.Snapshot{Limit: 0, Wait: time.Minute}, t)
		}
	}
	win := int64(config.DefaultBudgetWindowSecs)
	if id.BudgetWindowSecs > 0 {
		win = id.BudgetWindowSecs
	}
	ctx = context.WithoutCancel(ctx) // once begun, the decision completes
	// The key's own daily count first, in its own ledger; a refusal by
	// the tenant's decision below leaves it counted (as a refused attempt
	// of Admit does not: this is one request, refused after it).
	if id.KeyLedgered() && id.KeyDailyRequests != nil {
		ka := &store.Admission{Now: now, ID: newID(now), Tenant: id.KeyLedger(), Provider: ReplayProvider, Model: model,
			DailyLimit: *id.KeyDailyRequests, WindowSecs: id.KeyBudgetWindowSecs, MaxRetained: s.maxRetained}
		if ref := c.replayDecision(ctx, ka, nil, nil, t); ref != nil {
			ref.Message += " (this key's own limit, not its tenant's)"
			return ref
		}
	}
	daily := limit.Unlimited
	if id.DailyRequests != nil {
		daily = *id.DailyRequests
	}
	a := &store.Admission{Now: now, ID: newID(now), Tenant: t, Provider: ReplayProvider, Model: model, Debits: ds,
		DailyLimit: daily, WindowSecs: win, MaxRetained: s.maxRetained}
	return c.replayDecision(ctx, a, ds, metas, t)
}

// replayDecision admits a (no tokens, no spend: its counters are all it
// changes); the refusal when it does not fit.
func (c *Controller) replayDecision(ctx context.Context, a *store.Admission, ds []limit.Debit, metas []debitMeta, tenantName string) *Refusal {
	if a.DailyLimit == 0 {
		return c.dailyRefusal(ReplayProvider, 0, 86400*time.Second)
	}
	d, err := c.st.Admit(ctx, a)
	if err != nil {
		c.m.rejected.WithLabelValues(ReplayProvider, ReasonOverloaded).Inc()
		return &Refusal{Status: 503, Code: CodeOverloaded, Type: "server_error", Scope: ScopeRequest, RetryAfter: 5,
			Message: "admission state is unavailable; retry later"}
	}
	switch d.Refused {
	case store.RefusedRate:
		return c.rateRefusal(ReplayProvider, metas[d.Index], d.Snapshot, tenantName)
	case store.RefusedDaily:
		return c.dailyRefusal(ReplayProvider, a.DailyLimit, d.Wait)
	case store.Admitted:
	default:
		return nil // a full ledger refuses budgeted attempts only
	}
	if d.Recorded {
		// Unbudgeted, a replay takes no live hold; should a store record
		// one anyway, it ends now with nothing used.
		c.settle(&store.Settlement{Now: a.Now, ID: a.ID, Tenant: a.Tenant, Minute: d.Minute,
			WindowSecs: a.WindowSecs, WindowStart: d.WindowStart, Recorded: true, Final: true})
	}
	return nil
}
