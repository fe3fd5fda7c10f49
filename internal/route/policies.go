package route

import (
	"math"
	"math/rand/v2"
	"slices"

	"switchboard/internal/config"
	"switchboard/internal/limit"
	"switchboard/internal/spend"
)

// Estimate is one request's size in tokens, for the policies that price
// it (lowest_cost) and for the pre-send context check.
type Estimate struct {
	// Input is the prompt estimate (characters / 4).
	Input int64
	// Output is the request's output limit, or DefaultOutput when it
	// states none.
	Output int64
	// StatedOutput is the output limit the request states; 0 = none.
	StatedOutput int64
}

// DefaultOutput is the output a request without an output limit is
// compared at under lowest_cost: any fixed figure ranks candidates the
// same way for the output share; each model's own ceiling would favour
// the model with the smaller ceiling rather than the cheaper one.
const DefaultOutput = 1024

// EstimateOf sizes an (OpenAI-shaped) request body: input as the
// admission estimate counts it (text characters / 4), output as its
// stated limit times its candidates, DefaultOutput each when it states
// none.
func EstimateOf(body []byte) Estimate {
	est := Estimate{Input: max(1, (limit.InputChars(body)+3)/4), Output: DefaultOutput}
	l := limit.ReadLimits(body)
	if l.HasOutput && !l.Maxed() {
		est.StatedOutput = l.Output
		est.Output = l.Allowance(l.Output)
	}
	if !l.CandidatesMaxed {
		est.Output *= max(l.Candidates, 1)
	}
	return est
}

// Selector gives a route the policy its config names, for one request.
type Selector struct {
	Stats *Stats
	// Busy counts attempts in flight per provider (least_busy); nil
	// counts none, and least_busy orders as measured.
	Busy *Busy
	// Rand returns a number in [0,1) (weighted); nil uses math/rand.
	Rand func() float64
}

// Policy returns r's policy for a request of size est.
func (s *Selector) Policy(r *Route, est Estimate) Policy {
	m := Measured{Stats: s.Stats}
	switch r.Policy {
	case config.RoutingWeighted:
		return Weighted{Rand: s.Rand}
	case config.RoutingLeastBusy:
		return LeastBusy{Busy: s.Busy, Then: m}
	case config.RoutingLowestCost:
		return LowestCost{Tokens: est, Then: m}
	case config.RoutingLowestLatency:
		return LowestLatency{Stats: s.Stats, Then: m}
	}
	return m
}

// Order is r's attempt order for a request of size est.
func (s *Selector) Order(r *Route, est Estimate) []*Candidate {
	if r.Policy == "" || r.Policy == config.RoutingMeasured {
		return Measured{Stats: s.Stats}.Order(r) // the default, without an interface value
	}
	return s.Policy(r, est).Order(r)
}

// OrderBody is r's attempt order for a request body; the body is only
// sized when the policy prices it.
func (s *Selector) OrderBody(r *Route, body []byte) []*Candidate {
	var est Estimate
	if r.Policy == config.RoutingLowestCost {
		est = EstimateOf(body)
	}
	return s.Order(r, est)
}

// Likely is the order a typical request of r would take now, for display:
// weighted routing by descending weight (its draw is per request), a
// lowest_cost one priced at a 1,000-token prompt.
func (s *Selector) Likely(r *Route) []*Candidate {
	if r.Policy == config.RoutingWeighted {
		out := slices.Clone(r.Candidates)
		slices.SortStableFunc(out, func(a, b *Candidate) int { return b.Weight - a.Weight })
		return out
	}
	return s.Order(r, Estimate{Input: 1000, Output: DefaultOutput})
}

// Preferred is the routing choice of r, healthy or not: the measured
// active provider, or the first of its policy's likely order.
func (s *Selector) Preferred(r *Route) string {
	if r.Policy == config.RoutingMeasured {
		return Measured{Stats: s.Stats}.Active(r)
	}
	if o := s.Likely(r); len(o) > 0 {
		return o[0].Provider
	}
	return ""
}

// Weighted draws the first provider at random in proportion to the
// entries' weights, then the next among the rest the same way; entries of
// weight 0 follow in config order, as fallbacks only.
type Weighted struct {
	// Rand returns a number in [0,1); nil uses math/rand.
	Rand func() float64
}

// Order implements Policy.
func (p Weighted) Order(r *Route) []*Candidate {
	if len(r.Candidates) == 1 {
		return r.Candidates
	}
	draw := p.Rand
	if draw == nil {
		draw = rand.Float64
	}
	pool := make([]*Candidate, 0, len(r.Candidates))
	var zero []*Candidate
	total := 0
	for _, c := range r.Candidates {
		if c.Weight > 0 {
			pool = append(pool, c)
			total += c.Weight
		} else {
			zero = append(zero, c)
		}
	}
	out := make([]*Candidate, 0, len(r.Candidates))
	for len(pool) > 0 {
		x := int(draw() * float64(total))
		i := 0
		for ; i < len(pool)-1 && x >= pool[i].Weight; i++ {
			x -= pool[i].Weight
		}
		out = append(out, pool[i])
		total -= pool[i].Weight
		pool = slices.Delete(pool, i, i+1)
	}
	return append(out, zero...)
}

// LeastBusy puts the provider with the fewest attempts in flight on this
// replica first (streams count until they end); ties keep Then's order.
type LeastBusy struct {
	Busy *Busy
	Then Policy
}

// Order implements Policy.
func (p LeastBusy) Order(r *Route) []*Candidate {
	base := p.Then.Order(r)
	if len(base) == 1 || p.Busy == nil {
		return base
	}
	out := slices.Clone(base)
	n := make(map[*Candidate]int64, len(out))
	for _, c := range out {
		n[c] = p.Busy.InFlight(c.Provider)
	}
	slices.SortStableFunc(out, func(a, b *Candidate) int { return cmp64(n[a], n[b]) })
	return out
}

// LowestCost puts the provider whose catalog price for the request's
// estimate is lowest first; unpriced entries come last; ties keep Then's
// order.
type LowestCost struct {
	Tokens Estimate
	Then   Policy
}

// Order implements Policy.
func (p LowestCost) Order(r *Route) []*Candidate {
	base := p.Then.Order(r)
	if len(base) == 1 {
		return base
	}
	out := slices.Clone(base)
	cost := make(map[*Candidate]int64, len(out))
	for _, c := range out {
		cost[c] = math.MaxInt64 // unpriced: last
		if v, ok := CostOf(c, p.Tokens); ok {
			cost[c] = v
		}
	}
	slices.SortStableFunc(out, func(a, b *Candidate) int { return cmp64(cost[a], cost[b]) })
	return out
}

// CostOf is c's catalog price of a request of size est, nano-USD; false
// when the catalog has no input and output price for it.
func CostOf(c *Candidate, est Estimate) (int64, bool) {
	return c.Price.Cost(spend.Usage{Input: est.Input, Output: est.Output}, false)
}

// LowestLatency puts the provider with the lowest mean time to first
// token over the sample window first; providers without a sample follow
// (a failed probe counts as infinite); ties keep Then's order.
type LowestLatency struct {
	Stats *Stats
	Then  Policy
}

// Order implements Policy.
func (p LowestLatency) Order(r *Route) []*Candidate {
	base := p.Then.Order(r)
	if len(base) == 1 {
		return base
	}
	out := slices.Clone(base)
	ttft := make(map[*Candidate]float64, len(out))
	for _, c := range out {
		m := p.Stats.Metrics(r.Model.Name, c.Provider)
		ttft[c] = math.Inf(1)
		if m.Samples > 0 && !math.IsNaN(m.TTFT) {
			ttft[c] = m.TTFT
		}
	}
	slices.SortStableFunc(out, func(a, b *Candidate) int {
		x, y := ttft[a], ttft[b]
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return out
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
