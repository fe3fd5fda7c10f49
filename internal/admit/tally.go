package admit

import (
	"context"
	"sync"

	"switchboard/internal/spend"
)

// Tally sums what one client request's attempts cost, for its usage-log
// row. The charges are the very amounts each Settle or Fail writes to the
// ledger as settled, added when they are decided (before an asynchronous
// store write confirms them), so the row's cost equals the ledger's
// settled spend for the request to the nano-USD. A settlement the store
// then fails to apply (counted in switchboard_spend_settle_errors_total)
// leaves the hold in the ledger while the row shows the charge.
//
// Unmetered attempts (anonymous traffic without any limit: nothing goes to
// the ledger) are priced from the catalog instead, so a gateway running
// without auth still logs what its requests cost.
type Tally struct {
	mu sync.Mutex
	t  TallyTotals
	// open counts attempts being decided, or admitted and not yet ended;
	// closed is set by Close, and then done runs once open is 0.
	open   int
	closed bool
	done   func(TallyTotals)
}

// TallyTotals are a request's sums over its attempts.
type TallyTotals struct {
	// Attempts admitted (gateway refusals are not attempts).
	Attempts int
	// Input and Output tokens as settled (reported usage).
	Input, Output int64
	// Cost is the settled spend in nano-USD.
	Cost int64
	// Held is what stays reserved for the request's kept attempts
	// (uncertain outcome, unpriced answers): not spent, not released.
	Held int64
	// Unpriced: an attempt's usage had no price (no catalog price and no
	// provider bill), so Cost leaves it out: a lower bound.
	Unpriced bool
}

type tallyKey struct{}

// WithTally returns ctx carrying t: every attempt admitted under ctx adds
// to it.
func WithTally(ctx context.Context, t *Tally) context.Context {
	return context.WithValue(ctx, tallyKey{}, t)
}

func tallyOf(ctx context.Context) *Tally {
	t, _ := ctx.Value(tallyKey{}).(*Tally)
	return t
}

// Close calls done with the totals once every attempt admitted under the
// tally has ended: at once if they all have, else when the last does (a
// hedge's losing side may finish after the request has answered). Call it
// once, when no attempt will start any more.
func (t *Tally) Close(done func(TallyTotals)) {
	t.mu.Lock()
	t.closed, t.done = true, done
	t.fire()
}

// fire runs done, unlocking t, when the request is closed and idle.
func (t *Tally) fire() {
	if !t.closed || t.open > 0 || t.done == nil {
		t.mu.Unlock()
		return
	}
	done, totals := t.done, t.t
	t.done = nil
	t.mu.Unlock()
	done(totals)
}

// begin notes an attempt being decided: done waits for it. attempt (it
// was admitted) or ended (it was not) follows.
func (t *Tally) begin() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.open++
	t.mu.Unlock()
}

// attempt counts an admitted attempt (begun; it stays open until ended).
func (t *Tally) attempt() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.t.Attempts++
	t.mu.Unlock()
}

// ended notes that an attempt ended (after its charge was added).
func (t *Tally) ended() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.open--
	t.fire()
}

func (t *Tally) add(u Usage, cost, held int64, priced bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.t.Input += u.Input
	t.t.Output += u.Output
	t.t.Cost += cost
	t.t.Held += held
	t.t.Unpriced = t.t.Unpriced || !priced
	t.mu.Unlock()
}

// pricedUsage reports whether u has a price: a provider bill, or the
// catalog's price for it.
func pricedUsage(e *spend.Entry, u Usage) bool {
	return u.CostNanoUSD != nil || e != nil && e.Priced()
}

// unmetered prices an attempt the ledger never saw, from the catalog.
func (c *Controller) unmetered(p *Permit, u Usage) {
	if p.tally == nil {
		return
	}
	var cost int64
	priced := u.CostNanoUSD != nil
	if priced {
		cost = max(*u.CostNanoUSD, 0)
	} else if s := c.snap.Load(); s != nil {
		if e, ok := s.catalog.Lookup(p.provider, p.model); ok {
			cost, priced = e.Cost(u, false)
		}
	}
	p.tally.add(u, cost, 0, priced)
}
