package admit

import (
	"context"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/limit"
	"switchboard/internal/spend"
	"switchboard/internal/store"
	"switchboard/internal/tenant"
)

// hitProvider labels refusals of cache hits in switchboard_rejected_total.
const hitProvider = "cache"

// CountHit counts a request answered from the response cache as a request
// of id: against its key's and its tenant's rpm, in the same buckets as
// its provider attempts, so a hit can be refused with the same 429.
// Nothing else: no concurrency slot, no tokens, no spend, no attempt
// record, and not the daily count (daily_requests caps the requests that
// reach a provider); the decision's rolling-day count goes to a ledger of
// the tenant's hits ("\ncache:<tenant>"), apart from its own. The advice
// is the tightest rpm counter after the hit. A store that cannot decide
// lets the hit through, as rates fail open.
func (c *Controller) CountHit(ctx context.Context, id *tenant.Identity) (Advice, *Refusal) {
	s := c.snap.Load()
	if s == nil || id == nil || id.Tenant == "" {
		return Advice{}, nil
	}
	var ds []limit.Debit
	var ms []debitMeta
	if kr := windowed(rates{rateOf(id.KeyRPM), rateOf(nil)}, s.cfg.Limits.Window); kr.rpm.Limited() {
		ds = append(ds, limit.Debit{Key: "k:" + id.KeyID + ":rpm", Rate: kr.rpm, Cost: 1})
		ms = append(ms, debitMeta{"rpm", "key"})
	}
	if tr := s.tenantRates(id); tr.rpm.Limited() {
		ds = append(ds, limit.Debit{Key: "t:" + id.Tenant + ":rpm", Rate: tr.rpm, Cost: 1})
		ms = append(ms, debitMeta{"rpm", "tenant"})
	}
	if len(ds) == 0 {
		return Advice{}, nil
	}
	for i, d := range ds {
		if d.Rate.Limit == 0 {
			return Advice{}, c.rateRefusal(hitProvider, ms[i], limit.Snapshot{Limit: 0, Wait: time.Minute}, id.Tenant)
		}
	}
	now := c.clk.Now()
	a := &store.Admission{Now: now, ID: newID(now), Tenant: "\ncache:" + id.Tenant, Debits: ds, DailyLimit: limit.Unlimited,
		WindowSecs: config.DefaultBudgetWindowSecs}
	d, err := c.st.Admit(context.WithoutCancel(ctx), a)
	if err != nil {
		return Advice{}, nil
	}
	if d.Refused == store.RefusedRate {
		return Advice{}, c.rateRefusal(hitProvider, ms[d.Index], d.Snapshot, id.Tenant)
	}
	return advise(ds, ms, d), nil
}

// CostNano prices usage in nano-USD as CostUSD does (the provider's bill
// when reported, else the catalog); priced is false for an unknown price.
func (c *Controller) CostNano(provider, model string, u Usage) (nano int64, priced bool) {
	if u.CostNanoUSD != nil {
		return max(*u.CostNanoUSD, 0), true
	}
	cat := spend.Builtin()
	if s := c.snap.Load(); s != nil {
		cat = s.catalog
	}
	e, ok := cat.Lookup(provider, model)
	if !ok {
		return 0, false
	}
	return e.Cost(u, false)
}
