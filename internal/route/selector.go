package route

// Policy orders a route's candidates for one request. The attempt loop
// then skips unavailable ones (open circuit, quota pause) unless all are.
// Policies are small types so that others (weighted, least-busy, hedged)
// can slot in beside Measured.
type Policy interface {
	Order(r *Route) []*Candidate
}

// Measured puts the model's active provider first, then the others by
// measured score when the model auto-switches, else in config order.
type Measured struct{ Stats *Stats }

// Order implements Policy. The result is the caller's to read, not to
// modify: a single-provider route returns its own candidate list.
func (p Measured) Order(r *Route) []*Candidate {
	if len(r.Candidates) == 1 {
		return r.Candidates
	}
	active := p.ActiveIndex(r)
	out := make([]*Candidate, 0, len(r.Candidates))
	out = append(out, r.Candidates[active])
	rest := make([]*Candidate, 0, len(r.Candidates)-1)
	for i, c := range r.Candidates {
		if i != active {
			rest = append(rest, c)
		}
	}
	if r.AutoSwitch && len(rest) > 1 {
		rest = p.Stats.ByScore(r.Model.Name, rest)
	}
	return append(out, rest...)
}

// ActiveIndex is the index of the model's active provider: the measured
// choice when it is still configured, else the configured primary.
func (p Measured) ActiveIndex(r *Route) int {
	if name := p.Stats.Active(r.Model.Name); name != "" {
		for i, c := range r.Candidates {
			if c.Provider == name {
				return i
			}
		}
	}
	return r.Primary
}

// Active is the model's active provider name.
func (p Measured) Active(r *Route) string { return r.Candidates[p.ActiveIndex(r)].Provider }
