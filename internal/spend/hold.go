package spend

// Hold is one attempt's liability while it runs: what is reserved in its
// budget window, and what the settlement rules need to replace it.
//
// The rules (issue 6, item 2, and llmshim's "Spend caps"):
//   - a terminal response with explicit usage counters replaces the hold by
//     its cost; a provider-reported bill outranks the catalog, and a partial
//     bill seen earlier is a floor for a later catalog estimate;
//   - partial usage may raise the hold, never lower it;
//   - uncertainty (transport error after the send, cancellation, stream
//     abandonment) keeps the hold: it is never released to zero;
//   - an unpriced hold (budget_allow_unpriced) is replaced only by a cost
//     the catalog or the provider can state; without one it stays;
//   - a definite upstream error before any generation (an HTTP error status
//     without usage) releases the hold to the partial-bill floor (zero when
//     none): providers do not bill refused requests, and llmshim charges a
//     failed attempt only when usage or a bill is reported.
type Hold struct {
	// Held is the nano-USD currently reserved.
	Held int64
	// Floor is the largest provider-reported partial bill.
	Floor int64
	// Unpriced marks a hold of the remaining balance.
	Unpriced bool
	// Entry prices usage; nil when the model is unknown.
	Entry *Entry
	// Media charges input at the media rate.
	Media bool
}

// cost prices u: the provider's bill when given, else the catalog's.
func (h *Hold) cost(u Usage) (int64, bool) {
	if u.CostNanoUSD != nil {
		return max(*u.CostNanoUSD, 0), true
	}
	return h.Entry.Cost(u, h.Media)
}

// Partial takes a non-terminal usage snapshot and returns by how much the
// hold grows (never negative).
func (h *Hold) Partial(u Usage) (raise int64) {
	if u.CostNanoUSD != nil {
		h.Floor = max(h.Floor, *u.CostNanoUSD)
	}
	c, ok := h.cost(u)
	if !ok || c <= h.Held {
		return 0
	}
	raise, h.Held = c-h.Held, c
	return raise
}

// Settle takes the terminal usage. When resolved, the hold is replaced by
// charge; otherwise (an unpriced hold without a stated cost) it stays.
func (h *Hold) Settle(u Usage) (charge int64, resolved bool) {
	if u.CostNanoUSD != nil {
		return max(*u.CostNanoUSD, 0), true
	}
	c, ok := h.Entry.Cost(u, h.Media)
	if !ok {
		if h.Unpriced {
			return 0, false
		}
		// Unbudgeted and unknown: nothing to charge but the bills seen.
		return h.Floor, true
	}
	return max(c, h.Floor), true
}

// Fail is a definite upstream error before any generation: the hold
// shrinks to the partial-bill floor.
func (h *Hold) Fail() (charge int64) { return h.Floor }
