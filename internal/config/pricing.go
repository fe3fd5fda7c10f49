package config

import (
	"fmt"
	"slices"
	"strings"
)

// Bounds of pricing overrides.
const (
	maxPriceUSD   = 1_000_000 // per million tokens
	maxCeilingTok = 100_000_000
)

// validatePricing checks pricing: provider names must be defined; prices
// are finite and non-negative; tiers ascend.
func (l *loader) validatePricing(c *Config, providers []string) {
	names := make([]string, 0, len(c.Pricing))
	for n := range c.Pricing {
		names = append(names, n)
	}
	slices.Sort(names)
	known := "no providers are defined"
	if len(providers) > 0 {
		known = "known: " + strings.Join(providers, ", ")
	}
	for _, pn := range names {
		base := "pricing." + pn
		if c.Providers[pn] == nil {
			l.errAt(base, "unknown provider %q (%s); pricing is keyed by provider name, then the provider's model name", pn, known)
			continue
		}
		models := make([]string, 0, len(c.Pricing[pn]))
		for m := range c.Pricing[pn] {
			models = append(models, m)
		}
		slices.Sort(models)
		for _, m := range models {
			l.validatePrice(base+"."+m, c.Pricing[pn][m])
		}
	}
}

func (l *loader) validatePrice(base string, p *Price) {
	if p == nil {
		return
	}
	price := func(path string, v *float64) {
		if v != nil {
			l.floatRange(path, *v, 0, maxPriceUSD)
		}
	}
	price(base+".input", p.Input)
	price(base+".output", p.Output)
	price(base+".cache_read", p.CacheRead)
	price(base+".cache_write", p.CacheWrite)
	if p.Context != nil {
		l.intRange(base+".context", *p.Context, 1, maxCeilingTok)
	}
	if p.MaxOutput != nil {
		l.intRange(base+".max_output", *p.MaxOutput, 0, maxCeilingTok)
	}
	var prev int64
	for i, t := range p.Tiers {
		tb := fmt.Sprintf("%s.tiers[%d]", base, i)
		if t.Above < 1 || t.Above > maxCeilingTok {
			l.errAt(tb+".above", "must be between 1 and %d, got %d", maxCeilingTok, t.Above)
		} else if t.Above <= prev {
			l.errAt(tb+".above", "must be greater than the previous tier's (%d)", prev)
		}
		prev = max(prev, t.Above)
		price(tb+".input", t.Input)
		price(tb+".output", t.Output)
		price(tb+".cache_read", t.CacheRead)
		price(tb+".cache_write", t.CacheWrite)
	}
}
