package admit

import (
	"fmt"

	"switchboard/internal/config"
	"switchboard/internal/spend"
)

// probeBody is a minimal chat request without an output limit: what a
// budgeted key's ordinary request looks like to the pricing catalog.
var probeBody = []byte(`{"messages":[{"role":"user","content":"hi"}]}`)

// BudgetWarnings names every model route entry that keys with budget_usd
// (and without budget_allow_unpriced) cannot use, because the cost of an
// ordinary request to it cannot be bounded: no catalog price, or no output
// ceiling for a request without max_tokens. Such keys pass over the entry
// silently at request time, so `switchboard check` and boot say so once.
// Nil when no key is budgeted that way.
func BudgetWarnings(cfg *config.Config) []string {
	if !strictBudgets(cfg) {
		return nil
	}
	cat := spend.New(cfg)
	var out []string
	for i, m := range cfg.Models {
		for j, e := range m.Providers {
			p := cfg.Providers[e.Provider]
			if p == nil {
				continue
			}
			// Loading the config gave every entry its model (the route's
			// name by default).
			model := e.Model
			q := cat.Quote(spend.Request{Provider: e.Provider, ProviderType: p.Type, Model: model,
				Endpoint: "chat/completions", Body: probeBody})
			if q.Priced {
				continue
			}
			out = append(out, fmt.Sprintf("models[%d].providers[%d] (model %q, provider %q): keys with budget_usd cannot use it "+
				"and fall through to the next provider: %s; add pricing.%s.%q with input, output and max_output, "+
				"or give those keys budget_allow_unpriced: true", i, j, m.Name, e.Provider, q.Reason, e.Provider, model))
		}
	}
	return out
}

// strictBudgets reports whether any key has a budget without
// budget_allow_unpriced.
func strictBudgets(cfg *config.Config) bool {
	for _, keys := range []map[string]*config.KeySpec{cfg.Auth.Keys, cfg.Auth.FileKeys} {
		for _, k := range keys {
			if k.BudgetUSD != nil && !k.BudgetAllowUnpriced {
				return true
			}
		}
	}
	return false
}
