package spend

// Hold is one attempt's liability while it runs: what is reserved in its
// budget window, and what the settlement rules need to replace it.
//
// The rules (llmshim's "Spend caps", and issue 24):
//   - a terminal response replaces the hold by its cost only when its
//     required usage counters are present (input and output, explicit
//     zeros count: the caller checks) or the provider reports a bill; a
//     provider-reported bill outranks the catalog, and a partial bill seen
//     earlier is a floor for a later catalog estimate;
//   - partial or missing-counter usage may raise the hold, never lower it;
//   - uncertainty (transport error after the send, cancellation by the
//     client, stream abandonment) keeps the hold: it is never released to
//     zero;
//   - an unpriced hold (budget_allow_unpriced: the whole remaining
//     balance) is released only by a provider bill; a catalog price may
//     raise it, never release it;
//   - an attempt the gateway stops itself (a hedge that lost the race, a
//     stream cut at its output bound) is charged what it is known to have
//     cost (Known), within its hold;
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
	// Budgeted marks a hold reserved under a budget: Known never charges
	// past it.
	Budgeted bool
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

// Settle takes the terminal usage (its required counters present). When
// resolved, the hold is replaced by charge; otherwise (an unpriced hold
// without a provider bill) it stays.
func (h *Hold) Settle(u Usage) (charge int64, resolved bool) {
	if u.CostNanoUSD != nil {
		return max(*u.CostNanoUSD, 0), true
	}
	if h.Unpriced {
		// The catalog cannot state this attempt's fees (that is why it
		// is unpriced): only the provider's own bill releases it.
		return 0, false
	}
	c, ok := h.Entry.Cost(u, h.Media)
	if !ok {
		// Unbudgeted and unknown: nothing to charge but the bills seen.
		return h.Floor, true
	}
	return max(c, h.Floor), true
}

// InFlightMargin is the output tokens charged, beyond those seen, for an
// attempt the gateway cancels while it generates: a provider stops at its
// next write after the cancel reaches it, so a few tokens may be billed
// that were never relayed.
const InFlightMargin = 32

// Known charges an attempt the gateway stopped on purpose at what it is
// known to have cost: u (its input, and the output tokens it produced,
// the in-flight margin included by the caller), at the catalog's price or
// the provider's bill, never above the hold of a budgeted attempt (the
// hold bounded it when it was admitted) and never below a partial bill.
// An unpriced hold without a bill stays (resolved false).
func (h *Hold) Known(u Usage) (charge int64, resolved bool) {
	c, ok := h.Settle(u)
	if !ok {
		return 0, false
	}
	if h.Budgeted && u.CostNanoUSD == nil {
		c = max(min(c, h.Held), h.Floor)
	}
	return c, true
}

// Fail is a definite upstream error before any generation: the hold
// shrinks to the partial-bill floor.
func (h *Hold) Fail() (charge int64) { return h.Floor }
