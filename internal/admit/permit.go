package admit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"switchboard/internal/limit"
	"switchboard/internal/spend"
	"switchboard/internal/store"
)

// settleTimeout bounds one settlement write; the request's own context may
// be gone by then.
const settleTimeout = 10 * time.Second

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
	est                                int64
	tpm                                []limit.Debit // charged TPM debits
	hold                               spend.Hold
	charged                            int64 // nano-USD settled by Settle or Fail
	advice                             Advice
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

func (p *Permit) fill(st *store.Settlement) {
	st.Now, st.ID, st.Tenant, st.Provider = p.c.clk.Now(), p.id, p.tenant, p.provider
	st.Minute, st.WindowSecs, st.WindowStart = p.minute, p.windowSecs, p.windowStart
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

// Settle ends the attempt with a terminal response's explicit usage: the
// TPM estimate is replaced by the actual tokens and the spend reservation
// by the cost (the provider's bill when reported, else the catalog's,
// never below a partial bill seen before). An unpriced hold with no
// stated cost stays held.
func (p *Permit) Settle(u Usage) {
	p.finish(func() {
		p.key.Settle(u)
		actual := u.Tokens()
		st := &store.Settlement{TokenDelta: actual - p.est, Final: true,
			Tokens: &store.Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, Reasoning: u.Reasoning}}
		for _, d := range p.tpm {
			st.Adjust = append(st.Adjust, limit.Debit{Key: d.Key, Group: d.Group, Rate: d.Rate, Cost: actual - d.Cost})
		}
		held := p.hold.Held
		charge, resolved := p.hold.Settle(u)
		if !resolved {
			st.State, st.Held = store.StateUnpriced, held
			p.tally.add(u, 0, held, false)
			p.end(st, func(bool) {})
			return
		}
		st.ReservedDelta, st.SettledDelta, st.State, st.Held, st.Cost = -held, charge, store.StateSettled, 0, charge
		p.hold.Held = 0
		p.tally.add(u, charge, 0, pricedUsage(p.hold.Entry, u))
		p.charged = charge
		p.end(st, func(ok bool) { p.ended(ok, held, charge) })
	}, func() { p.c.unmetered(p, u) })
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
// the send, a cancellation, an abandoned stream): the reservation stays in
// its window and the TPM estimate stands.
func (p *Permit) Keep() {
	p.finish(func() {
		p.key.Keep()
		p.tally.add(Usage{}, 0, p.hold.Held, true)
		p.end(&store.Settlement{State: store.StateKept, Held: p.hold.Held}, func(bool) {})
	}, nil)
}

// Fail ends an attempt that got a definite upstream error before any
// generation (an HTTP error status without usage): the reservation is
// released down to any partial bill reported earlier (zero otherwise),
// since providers do not bill refused requests; the TPM estimate stands.
// When the error body did report usage or a bill, call Settle instead.
func (p *Permit) Fail() {
	p.finish(func() {
		p.key.Fail()
		held := p.hold.Held
		charge := p.hold.Fail()
		p.hold.Held = 0
		p.tally.add(Usage{}, charge, 0, true) // nothing generated: nothing to price
		p.charged = charge
		p.end(&store.Settlement{ReservedDelta: -held, SettledDelta: charge, State: store.StateFailed,
			Cost: charge, Final: true}, func(ok bool) { p.ended(ok, held, charge) })
	}, nil)
}

// Partial takes a non-terminal usage snapshot (e.g. a stream's running
// usage): it may raise the reservation, never lower it. It does not end
// the attempt.
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
	if !p.settle(&store.Settlement{ReservedDelta: raise, State: store.StateOpen, Held: p.hold.Held}) {
		p.hold = before
		return
	}
	if !p.quiet {
		p.c.m.reserved.WithLabelValues(p.label, p.provider).Add(float64(raise))
	}
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
