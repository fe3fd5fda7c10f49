package admit

import (
	"context"
	"sync"
	"sync/atomic"

	"switchboard/internal/limit"
	"switchboard/internal/spend"
	"switchboard/internal/store"
)

// Permit is one admitted attempt. Finish it with exactly one of Settle,
// Keep or Fail; each releases the provider slot, and later calls are
// no-ops. Partial may come before. Safe for concurrent use.
type Permit struct {
	c    *Controller
	noop bool
	// key is the attempt in the key's own ledger (its daily count and
	// budget), finished with this one; quiet marks such a permit, whose
	// moves are not the tenant's spend metrics.
	key   *Permit
	quiet bool

	mu      sync.Mutex
	done    bool
	release func()

	id, tenant, label, provider, model string
	minute, windowSecs, windowStart    int64
	// recorded: the attempt has a live hold in the store (budgeted).
	recorded bool
	// est is the estimate this attempt counted in its ledger's minute (0
	// when its request was counted by another attempt).
	est int64
	// tpm are the charged TPM debits this attempt corrects itself: the
	// provider's and the global ones, and the tenant's when they count
	// per attempt.
	tpm []limit.Debit
	// req is the request's counting share (request counting; nil
	// otherwise); keyShare: this is the key's own ledger's permit.
	req      *Request
	keyShare bool
	// inputBound and outputBound are the reservation's input tokens and
	// output tokens (all candidates); 0 when nothing was priced.
	inputBound, outputBound int64
	hold                    spend.Hold
	charged                 int64 // nano-USD settled by Settle or Fail
	advice                  Advice
	// tally sums the request's attempts for its usage-log row (nil: none).
	tally *Tally
	// restored is a hold that a failed asynchronous settlement left in the
	// store after Settle or Fail had zeroed hold.Held.
	restored atomic.Int64
}

// ID is the attempt's ledger id.
func (p *Permit) ID() string { return p.id }

// Advice returns the advisory counter captured at admission: the selected
// counter (RPM, then TPM, then daily), its remaining after this request,
// and the seconds to its reset.
func (p *Permit) Advice() (limit, remaining, reset int, ok bool) {
	if p == nil || !p.advice.OK {
		return 0, 0, 0, false
	}
	return int(p.advice.Limit), int(p.advice.Remaining), int(p.advice.Reset), true
}

// Reserved is the nano-USD the attempt holds now.
func (p *Permit) Reserved() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hold.Held + p.restored.Load()
}

// Cost is the nano-USD the attempt costs its budget so far: what Settle or
// Fail charged, plus what it still holds (all of it after Keep).
func (p *Permit) Cost() int64 {
	if p == nil || p.noop {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.restored.Load(); r > 0 {
		return p.hold.Held + r // the settlement was not applied: the hold stands
	}
	return p.charged + p.hold.Held
}

// finish runs f once (for a metered permit; noop is run for an
// unmetered one), then releases the slot and tells the request's tally
// that this attempt ended.
func (p *Permit) finish(f func(), noop func()) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	if !p.noop {
		f()
	} else if noop != nil {
		noop()
	}
	rel := p.release
	p.mu.Unlock()
	if rel != nil {
		rel()
	}
	p.tally.ended()
}

// fill completes st with the attempt's identity; Minute is the attempt's
// unless st names one (the request's counted minute).
func (p *Permit) fill(st *store.Settlement) {
	st.Now, st.ID, st.Tenant, st.Recorded = p.c.clk.Now(), p.id, p.tenant, p.recorded
	st.WindowSecs, st.WindowStart = p.windowSecs, p.windowStart
	if st.Minute == 0 {
		st.Minute = p.minute
	}
}

// end writes an attempt's last settlement. When the store can take it
// without waiting (SQLite, Redis), the caller goes on at once — the
// answer is not held for the write — and done runs once it is applied;
// the store still applies it before any later read or admission of this
// process. Otherwise it is written here. done must not take p.mu.
func (p *Permit) end(st *store.Settlement, done func(ok bool)) {
	if as, ok := p.c.st.(store.AsyncSettler); ok {
		p.fill(st)
		as.SettleAsync(st, func(err error) {
			if err != nil {
				// The store applied nothing: the reservation stays.
				p.c.m.settleErr.Inc()
			}
			done(err == nil)
		})
		return
	}
	done(p.settle(st))
}

func (p *Permit) settle(st *store.Settlement) bool {
	p.fill(st)
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := p.c.st.Settle(ctx, st); err != nil {
		// The store applied nothing: the reservation stays, as for an
		// uncertain outcome.
		p.c.m.settleErr.Inc()
		return false
	}
	return true
}

// Settle ends the attempt with a terminal response's usage, its required
// counters present (input and output, explicit zeros counting; input
// alone for embeddings) or a provider bill: the TPM estimate is replaced
// by the actual tokens and the spend reservation by the cost (the
// provider's bill when reported, else the catalog's, never below a
// partial bill seen before). An unpriced hold without a bill stays held.
func (p *Permit) Settle(u Usage) {
	p.stop(u, true, true)
}

// Cut ends an answer the gateway cut at its output bound (OutputBound):
// u is what it is known to have used (the input as reported, else
// InputBound, and the output tokens it produced). It is charged that,
// within its hold; its tokens are the request's.
func (p *Permit) Cut(u Usage) {
	if p != nil && !p.noop {
		p.c.m.overBound.WithLabelValues(p.provider, p.model, "cut").Inc()
	}
	p.stop(u, true, false)
}

// OverBound reports whether a terminal answer's output passed the output
// bound its reservation covered (counted as charged in full: Settle
// charges it all); the caller logs it.
func (p *Permit) OverBound(u Usage) bool {
	ob := p.OutputBound()
	if ob <= 0 || u.Output <= ob {
		return false
	}
	p.c.m.overBound.WithLabelValues(p.provider, p.model, "charged").Inc()
	return true
}

// Lose ends a hedged attempt that lost the race, canceled by the gateway
// itself: u is what it is known to have used (the input as reported,
// else InputBound, and the output tokens it produced, none when it had
// not answered). It is charged that plus spend.InFlightMargin output
// tokens (at most its output bound), within its hold; its tokens count
// in the provider's and global buckets, not in the request's.
func (p *Permit) Lose(u Usage) {
	out := u.Output + spend.InFlightMargin
	if p.outputBound > 0 {
		out = min(out, max(u.Output, p.outputBound))
	}
	u.Output = out
	p.stop(u, false, false)
}

// stop ends the attempt on u: terminal usage (Settle) or what a stop by
// the gateway is known to have cost (Known). own: u's tokens are the
// request's (not a hedge's loser's).
func (p *Permit) stop(u Usage, own, terminal bool) {
	if p == nil {
		return
	}
	p.finish(func() { p.settleUsage(u, own, terminal) }, func() { p.c.unmetered(p, u) })
}

func (p *Permit) settleUsage(u Usage, own, terminal bool) {
	p.key.stop(u, own, terminal)
	actual := u.Tokens()
	st := &store.Settlement{Final: true}
	for _, d := range p.tpm {
		st.Adjust = append(st.Adjust, limit.Debit{Key: d.Key, Group: d.Group, Rate: d.Rate, Cost: actual - d.Cost})
	}
	switch {
	case p.req == nil:
		st.TokenDelta = actual - p.est
	case p.keyShare && own:
		st.TokenDelta, st.Minute = p.req.reconcileKey(actual)
	case own:
		var adj []limit.Debit
		adj, st.TokenDelta, st.Minute = p.req.reconcile(actual)
		st.Adjust = append(st.Adjust, adj...)
	}
	held := p.hold.Held
	charge, resolved := p.hold.Settle(u)
	if !terminal {
		charge, resolved = p.hold.Known(u)
	}
	if !resolved {
		p.req.keep() // the hold stands for tokens that may have been used
		p.tally.add(u, 0, held, false)
		p.end(st, func(bool) {})
		return
	}
	st.ReservedDelta, st.SettledDelta = -held, charge
	p.hold.Held = 0
	p.tally.add(u, charge, 0, pricedUsage(p.hold.Entry, u))
	p.charged = charge
	p.end(st, func(ok bool) { p.ended(ok, held, charge) })
}

// ended accounts for a settlement that replaced held by charge.
func (p *Permit) ended(ok bool, held, charge int64) {
	if !ok {
		p.restored.Store(held)
		return
	}
	p.moved(held, charge)
}

// Keep ends an attempt whose outcome is uncertain (a transport error after
// the send, a cancellation by the client, an abandoned stream): the
// reservation stays in its window and the TPM estimate stands. The
// attempt itself ends: its live hold goes, its money stays.
func (p *Permit) Keep() {
	p.finish(func() {
		p.key.Keep()
		p.req.keep()
		p.tally.add(Usage{}, 0, p.hold.Held, true)
		if p.recorded {
			p.end(&store.Settlement{Final: true}, func(bool) {})
		}
	}, nil)
}

// Fail ends an attempt that got a definite upstream error before any
// generation (an HTTP error status without usage): the reservation is
// released down to any partial bill reported earlier (zero otherwise),
// since providers do not bill refused requests; the TPM estimate stands
// (the request's, until Unanswered). When the error body did report usage
// or a bill, call Settle instead.
func (p *Permit) Fail() {
	p.finish(func() {
		p.key.Fail()
		held := p.hold.Held
		charge := p.hold.Fail()
		p.hold.Held = 0
		p.tally.add(Usage{}, charge, 0, true) // nothing generated: nothing to price
		p.charged = charge
		p.end(&store.Settlement{ReservedDelta: -held, SettledDelta: charge, Final: true},
			func(ok bool) { p.ended(ok, held, charge) })
	}, nil)
}

// refused ends the key's permit of an attempt whose tenant decision then
// refused it: its hold is released and, when it counted the request in
// the key's day, that count and its tokens are taken back (the request
// was not made).
func (p *Permit) refused(counted bool) {
	p.finish(func() {
		held := p.hold.Held
		p.hold.Held = 0
		st := &store.Settlement{ReservedDelta: -held, Final: true}
		if counted {
			st.RequestDelta, st.TokenDelta = -1, -p.est
		}
		p.end(st, func(bool) {})
	}, nil)
}

// Partial takes a non-terminal usage snapshot (e.g. a stream's running
// usage, or a terminal answer missing a required counter): it may raise
// the reservation, never lower it. It does not end the attempt.
func (p *Permit) Partial(u Usage) {
	if p == nil || p.noop {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.key.Partial(u)
	before := p.hold
	raise := p.hold.Partial(u)
	if raise == 0 {
		return
	}
	if !p.settle(&store.Settlement{ReservedDelta: raise}) {
		p.hold = before
		return
	}
	if !p.quiet {
		p.c.m.reserved.WithLabelValues(p.label, p.provider).Add(float64(raise))
	}
}

// InputBound is the reservation's input tokens (0 when unpriced or
// unmetered): what a stopped attempt's input is taken to be when the
// provider did not report it.
func (p *Permit) InputBound() int64 {
	if p == nil {
		return 0
	}
	return p.inputBound
}

// OutputBound is the output the reservation covers, in tokens over all
// candidates; 0 when the attempt has no priced reservation (no bound to
// hold a stream to).
func (p *Permit) OutputBound() int64 {
	if p == nil {
		return 0
	}
	if !p.hold.Budgeted {
		return p.key.OutputBound() // the key's own budget, when it has one
	}
	if p.hold.Unpriced {
		return 0
	}
	return p.outputBound
}

// moved records a reservation replaced by a settled amount.
func (p *Permit) moved(held, charge int64) {
	if p.quiet {
		return
	}
	if held != 0 {
		p.c.m.reserved.WithLabelValues(p.label, p.provider).Sub(float64(held))
	}
	if charge > 0 {
		p.c.m.settled.WithLabelValues(p.label, p.provider).Add(float64(charge))
	}
}
