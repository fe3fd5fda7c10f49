package admit

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/limit"
	"switchboard/internal/spend"
	"switchboard/internal/store"
	"switchboard/internal/tenant"
)

// MaxUsageProviders bounds rate_limits in GET /v1/usage.
const MaxUsageProviders = 32

// Counter is one counter snapshot: its limit, what remains, and the
// seconds until it is full again (omitted when it is).
type Counter struct {
	Limit     int64 `json:"limit"`
	Remaining int64 `json:"remaining"`
	Reset     int64 `json:"reset,omitempty"`
}

// SpendView is the caller's spend in the current budget window. Amounts
// are exact decimals of USD (json numbers made from integers) and the
// nano-USD integers they come from.
type SpendView struct {
	WindowSecs    int64        `json:"window_secs"`
	WindowStart   int64        `json:"window_start"`
	WindowEnd     int64        `json:"window_end"`
	ReservedUSD   json.Number  `json:"reserved_usd"`
	SettledUSD    json.Number  `json:"settled_usd"`
	BudgetUSD     *json.Number `json:"budget_usd,omitempty"`
	RemainingUSD  *json.Number `json:"remaining_usd,omitempty"`
	ReservedNano  int64        `json:"reserved_nano_usd"`
	SettledNano   int64        `json:"settled_nano_usd"`
	BudgetNano    *int64       `json:"budget_nano_usd,omitempty"`
	RemainingNano *int64       `json:"remaining_nano_usd,omitempty"`
}

// UsageView is the body of GET /v1/usage for the authenticated caller.
type UsageView struct {
	Object string `json:"object"`
	// Tenant is the caller's tenant ("" for the anonymous token or no
	// auth).
	Tenant string `json:"tenant,omitempty"`
	// RateLimits, present only with advisory headers on (MultiLLM's
	// contract), maps at most 32 providers (for a tenant, who never sees
	// provider names: the models it may call) to the caller's own counter
	// that governs its requests there: the counter the advisory headers
	// would show (its rpm, else tpm, else daily_requests); empty when the
	// caller has no limit.
	RateLimits map[string]Counter `json:"rate_limits,omitzero"`
	// ProviderLimits is the operator's view (admin keys, auth.token, or
	// no auth): at most 32 providers with a limit of their own, mapped to
	// their fleet-wide bucket (RPM, else TPM).
	ProviderLimits map[string]Counter `json:"provider_limits,omitempty"`
	// Limits are the caller's own counters: rpm, tpm, daily_requests.
	Limits map[string]Counter `json:"limits,omitempty"`
	// RequestsToday and TokensToday cover the rolling 24 h; tokens are
	// estimates until their attempts settle.
	RequestsToday int64      `json:"requests_today"`
	TokensToday   int64      `json:"tokens_today"`
	Spend         *SpendView `json:"spend"`
	// Key is the caller's issued key's own limits, enforced on top of the
	// tenant's; absent when the key has none.
	Key *KeyView `json:"key,omitempty"`
}

// KeyView is an issued key's own standing, in the tenant's shapes: its
// counters (rpm, tpm, daily_requests) and, when it has a daily count or a
// budget of its own, its requests and spend in the key's own ledger.
type KeyView struct {
	ID            string             `json:"id"`
	Limits        map[string]Counter `json:"limits,omitempty"`
	RequestsToday *int64             `json:"requests_today,omitempty"`
	Spend         *SpendView         `json:"spend,omitempty"`
}

func counterOf(sn limit.Snapshot) Counter {
	c := Counter{Limit: sn.Limit, Remaining: sn.Remaining}
	if sn.Reset > 0 {
		c.Reset = resetSecs(sn.Reset, 86400)
	}
	return c
}

func usd(nano int64) *json.Number {
	n := json.Number(spend.FormatUSD(nano))
	return &n
}

// UsageOptions choose the optional parts of a usage view.
type UsageOptions struct {
	// Advisory adds rate_limits (advisory headers are on).
	Advisory bool
	// ByModel keys rate_limits by the models the caller may call instead
	// of by provider: a tenant never learns provider names.
	ByModel bool
	// Providers adds provider_limits (the caller is an operator).
	Providers bool
	// Key adds key: the caller's key's own limits. Off for the views of a
	// tenant, whose identity is one of its keys.
	Key bool
}

// Usage reads where the caller stands. It never reserves or debits.
func (c *Controller) Usage(ctx context.Context, id *tenant.Identity, o UsageOptions) (*UsageView, error) {
	s := c.snap.Load()
	now := c.clk.Now()
	v := &UsageView{Object: "usage", Tenant: tenantOf(id)}
	if o.Advisory {
		v.RateLimits = map[string]Counter{}
	}
	if s == nil {
		return v, nil
	}
	// Provider buckets, by name, at most 32: operators only.
	var names []string
	if o.Providers {
		for n, p := range s.providers {
			if p.rates.rpm.Limited() || p.rates.tpm.Limited() {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		names = names[:min(len(names), MaxUsageProviders)]
	}
	var ds []limit.Debit
	for _, n := range names {
		p := s.providers[n]
		if p.rates.rpm.Limited() {
			ds = append(ds, limit.Debit{Key: "p:" + n + ":rpm", Group: groupOf(n), Rate: p.rates.rpm})
		} else {
			ds = append(ds, limit.Debit{Key: "p:" + n + ":tpm", Group: groupOf(n), Rate: p.rates.tpm})
		}
	}
	t := tenantOf(id)
	var own []string
	if id != nil && t != "" {
		tr := s.tenantRates(id)
		for _, x := range []struct {
			name string
			v    *int64
			r    limit.Rate
		}{{"rpm", id.RPM, tr.rpm}, {"tpm", id.TPM, tr.tpm}} {
			if x.v != nil {
				ds = append(ds, limit.Debit{Key: "t:" + t + ":" + x.name, Rate: x.r})
				own = append(own, x.name)
			}
		}
	}
	snaps, err := c.st.Peek(ctx, now, ds)
	if err != nil {
		return nil, err
	}
	if len(names) > 0 {
		v.ProviderLimits = make(map[string]Counter, len(names))
	}
	for i, n := range names {
		v.ProviderLimits[n] = counterOf(snaps[i])
	}
	if len(own) > 0 {
		v.Limits = map[string]Counter{}
		for i, n := range own {
			v.Limits[n] = counterOf(snaps[len(names)+i])
		}
	}

	win := int64(config.DefaultBudgetWindowSecs)
	if id != nil && id.BudgetWindowSecs > 0 {
		win = id.BudgetWindowSecs
	}
	r, err := c.st.Usage(ctx, store.UsageQuery{Now: now, Tenant: t, WindowSecs: win})
	if err != nil {
		return nil, err
	}
	v.RequestsToday, v.TokensToday = r.Requests, r.Tokens
	if id != nil && id.DailyRequests != nil {
		if v.Limits == nil {
			v.Limits = map[string]Counter{}
		}
		v.Limits["daily_requests"] = dailyCounter(*id.DailyRequests, r, now)
	}
	var b *int64
	if id.Budgeted() {
		b = id.BudgetNano
	}
	v.Spend = ledgerSpend(r, win, b)
	if o.Advisory {
		v.RateLimits = ownPerRoute(s, v.Limits, o.ByModel)
	}
	if o.Key {
		if v.Key, err = c.keyUsage(ctx, s, id, now); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// KeyUsage reads an issued key's own standing (nil when the key has no
// limits of its own), for the operator's overview. It never reserves or
// debits.
func (c *Controller) KeyUsage(ctx context.Context, id *tenant.Identity) (*KeyView, error) {
	s := c.snap.Load()
	if s == nil {
		return nil, nil
	}
	return c.keyUsage(ctx, s, id, c.clk.Now())
}

// keyUsage reads the key's own rate buckets ("k:<id>:…", as debits names
// them) and its own ledger (Identity.KeyLedger); nil when it has none.
func (c *Controller) keyUsage(ctx context.Context, s *snapshot, id *tenant.Identity, now time.Time) (*KeyView, error) {
	// Key rate buckets are only debited for a tenant's key (see debits).
	rated := id != nil && tenantOf(id) != "" && (id.KeyRPM != nil || id.KeyTPM != nil)
	if !rated && !id.KeyLedgered() {
		return nil, nil
	}
	kv := &KeyView{ID: id.KeyID, Limits: map[string]Counter{}}
	if rated {
		kr := windowed(rates{rateOf(id.KeyRPM), rateOf(id.KeyTPM)}, s.cfg.Limits.Window)
		var names []string
		var ds []limit.Debit
		for _, x := range []struct {
			name string
			v    *int64
			r    limit.Rate
		}{{"rpm", id.KeyRPM, kr.rpm}, {"tpm", id.KeyTPM, kr.tpm}} {
			if x.v != nil {
				ds = append(ds, limit.Debit{Key: "k:" + id.KeyID + ":" + x.name, Rate: x.r})
				names = append(names, x.name)
			}
		}
		snaps, err := c.st.Peek(ctx, now, ds)
		if err != nil {
			return nil, err
		}
		for i, n := range names {
			kv.Limits[n] = counterOf(snaps[i])
		}
	}
	if id.KeyLedgered() {
		win := id.KeyBudgetWindowSecs
		if win <= 0 {
			win = config.DefaultBudgetWindowSecs
		}
		r, err := c.st.Usage(ctx, store.UsageQuery{Now: now, Tenant: id.KeyLedger(), WindowSecs: win})
		if err != nil {
			return nil, err
		}
		if id.KeyDailyRequests != nil {
			kv.Limits["daily_requests"] = dailyCounter(*id.KeyDailyRequests, r, now)
		}
		kv.RequestsToday = &r.Requests
		kv.Spend = ledgerSpend(r, win, id.KeyBudgetNano)
	}
	return kv, nil
}

// dailyCounter is a daily_requests counter from a ledger's usage.
func dailyCounter(lim int64, r *store.UsageReport, now time.Time) Counter {
	dc := Counter{Limit: lim, Remaining: max(lim-r.Requests, 0)}
	if r.Requests > 0 {
		dc.Reset = resetSecs(store.DailyExpiry(r.OldestMinute).Sub(now), 86400)
	}
	return dc
}

// ledgerSpend is a ledger's spend in its window against budget (nil: none).
func ledgerSpend(r *store.UsageReport, win int64, budget *int64) *SpendView {
	sv := &SpendView{WindowSecs: win, WindowStart: r.WindowStart, WindowEnd: r.WindowEnd,
		ReservedUSD: *usd(r.Reserved), SettledUSD: *usd(r.Settled), ReservedNano: r.Reserved, SettledNano: r.Settled}
	if budget != nil {
		b := *budget
		rem := max(b-r.Reserved-r.Settled, 0)
		sv.BudgetNano, sv.RemainingNano, sv.BudgetUSD, sv.RemainingUSD = &b, &rem, usd(b), usd(rem)
	}
	return sv
}

// ownPerRoute maps at most 32 providers (by name; or, byModel, the
// models) to the caller's own counter that governs its requests on each:
// rpm, else tpm, else daily_requests, as the advisory headers select it.
// Switchboard's tenant counters span providers, so every entry shows the
// same counter.
func ownPerRoute(s *snapshot, own map[string]Counter, byModel bool) map[string]Counter {
	out := map[string]Counter{}
	var sel *Counter
	for _, k := range []string{"rpm", "tpm", "daily_requests"} {
		if c, ok := own[k]; ok && c.Limit > 0 {
			sel = &c
			break
		}
	}
	if sel == nil {
		return out
	}
	names := make([]string, 0, len(s.providers))
	if byModel {
		for _, m := range s.cfg.Models {
			names = append(names, m.Name)
		}
	} else {
		for n := range s.providers {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names[:min(len(names), MaxUsageProviders)] {
		out[n] = *sel
	}
	return out
}

// Tenants lists the configured tenants (one identity each, sorted by
// name), for the operator's views of every tenant's spend.
func (c *Controller) Tenants() []*tenant.Identity {
	s := c.snap.Load()
	if s == nil {
		return nil
	}
	return s.keys.Tenants()
}

// CostUSD prices a response's usage for usage.cost_usd: the provider's
// bill when reported, else the catalog's price; nil (never 0) when the
// model's price is unknown.
func (c *Controller) CostUSD(provider, model string, u Usage) *float64 {
	var nano int64
	if u.CostNanoUSD != nil {
		nano = *u.CostNanoUSD
	} else {
		cat := spend.Builtin()
		if s := c.snap.Load(); s != nil {
			cat = s.catalog
		}
		e, ok := cat.Lookup(provider, model)
		if !ok {
			return nil
		}
		n, priced := e.Cost(u, false)
		if !priced {
			return nil
		}
		nano = n
	}
	f := spend.USD(nano)
	return &f
}

// Prices lists the effective price table of the current config.
func (c *Controller) Prices() []spend.Row {
	if s := c.snap.Load(); s != nil {
		return s.catalog.Rows()
	}
	return spend.Builtin().Rows()
}

// WritePrices prints the effective price table of cfg (nil: the built-in
// catalog), for `switchboard prices`.
func WritePrices(w io.Writer, cfg *config.Config) error {
	return spend.New(cfg).WriteTable(w)
}
