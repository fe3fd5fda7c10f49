package admit

import (
	"context"
	"sync"
	"time"

	"switchboard/internal/limit"
	"switchboard/internal/store"
)

// Request is one client request's share of admission under
// limits.tenant_counting: request (the default). The tenant's and its key's
// own counters (rpm, tpm, the daily count) describe what the tenant asked
// for, so they are debited once, by the first attempt admitted, whatever
// retries, fallbacks and hedges the gateway then makes; provider and
// global buckets, and the spend hold, stay per attempt. The tokens it
// estimated are replaced by the tokens the request's answers used.
//
// Attach one per client request with WithRequest before its attempts run;
// attempts admitted under a context without one count per attempt.
type Request struct {
	// mu serialises the decisions of the request's attempts (a hedge's
	// sides admit concurrently) so that exactly one counts.
	mu sync.Mutex
	// counted: an admitted attempt debited the tenant's counters.
	counted bool
	// advice is the caller's own counter as the counting attempt saw it:
	// the later attempts' advisory headers show it.
	advice Advice
	// The counting attempt's estimate, outstanding until an answer's
	// usage replaces it: in the tenant's TPM buckets (Cost is what is
	// outstanding) and in its ledger's and the key's minute.
	tenantTPM []limit.Debit
	tenant    ledgerShare
	key       ledgerShare
	// kept: an attempt ended uncertain (its tokens may have been used).
	kept bool
}

// ledgerShare is the request's estimate in one ledger (the tenant's, or
// an issued key's own).
type ledgerShare struct {
	ledger                  string
	minute                  int64
	windowSecs, windowStart int64
	est                     int64
}

type requestKey struct{}

// WithRequest returns ctx carrying a new Request: every attempt admitted
// under ctx belongs to it.
func WithRequest(ctx context.Context) (context.Context, *Request) {
	r := &Request{}
	return context.WithValue(ctx, requestKey{}, r), r
}

func requestOf(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

// reconcile replaces the outstanding estimate by actual tokens used by an
// answer: the tenant TPM corrections and the tenant ledger's token delta
// (with its minute). Later answers of the request add their own tokens.
func (r *Request) reconcile(actual int64) (adj []limit.Debit, delta, minute int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.tenantTPM {
		d := r.tenantTPM[i]
		adj = append(adj, limit.Debit{Key: d.Key, Group: d.Group, Rate: d.Rate, Cost: actual - d.Cost})
		r.tenantTPM[i].Cost = 0
	}
	delta = actual - r.tenant.est
	r.tenant.est = 0
	return adj, delta, r.tenant.minute
}

// reconcileKey is reconcile for the key's own ledger.
func (r *Request) reconcileKey(actual int64) (delta, minute int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delta = actual - r.key.est
	r.key.est = 0
	return delta, r.key.minute
}

func (r *Request) keep() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.kept = true
	r.mu.Unlock()
}

// Unanswered ends a request that got no answer: every attempt failed
// before any generation (or was refused), so the tokens its estimate
// stood for were never used and leave the tenant's TPM and day. When an
// attempt ended uncertain, or an answer's usage already replaced the
// estimate, nothing changes. Call it once, after the attempt loop gave up
// (its attempts have all ended then).
func (c *Controller) Unanswered(r *Request) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if !r.counted || r.kept {
		r.mu.Unlock()
		return
	}
	var adj []limit.Debit
	for i, d := range r.tenantTPM {
		if d.Cost != 0 {
			adj = append(adj, limit.Debit{Key: d.Key, Group: d.Group, Rate: d.Rate, Cost: -d.Cost})
			r.tenantTPM[i].Cost = 0
		}
	}
	shares := []ledgerShare{r.tenant, r.key}
	r.tenant.est, r.key.est = 0, 0
	r.mu.Unlock()
	now := c.clk.Now()
	for i, sh := range shares {
		if sh.ledger == "" || sh.est == 0 && (i > 0 || len(adj) == 0) {
			continue
		}
		// No live hold stands for this correction: the guard keeps it to
		// one application.
		st := &store.Settlement{Now: now, ID: newID(now), Tenant: sh.ledger, Minute: sh.minute,
			WindowSecs: sh.windowSecs, WindowStart: sh.windowStart, TokenDelta: -sh.est, Final: true}
		if i == 0 {
			st.Adjust = adj
		}
		c.settle(st)
	}
}

// settle writes a settlement that no permit stands for: without waiting
// when the store can take it so (the answer is not held for it).
func (c *Controller) settle(st *store.Settlement) {
	if as, ok := c.st.(store.AsyncSettler); ok {
		as.SettleAsync(st, func(err error) {
			if err != nil {
				c.m.settleErr.Inc()
			}
		})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := c.st.Settle(ctx, st); err != nil {
		c.m.settleErr.Inc()
	}
}

// settleTimeout bounds one settlement write; the request's own context may
// be gone by then.
const settleTimeout = 10 * time.Second
