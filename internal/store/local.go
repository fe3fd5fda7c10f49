package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"switchboard/internal/limit"
)

// record is one live hold: a budgeted attempt admitted and not yet ended.
type record struct {
	ID, Tenant              string
	Created                 time.Time
	WindowSecs, WindowStart int64
	Held                    int64
	Expires                 int64 // Unix s after which it may be reclaimed
}

// ledger is the durable part of a local store. Its transactions are only
// used under the store's lock, so they never run concurrently.
type ledger interface {
	begin(ctx context.Context) (ledgerTx, error)
	close() error
}

// ledgerTx reads and writes in one transaction; writes become visible (and
// durable) at commit, and vanish at rollback.
type ledgerTx interface {
	// reclaim deletes up to n live holds expired at now, expired guard
	// entries, and stale counters.
	reclaim(now int64, n int) error
	// retained is the number of live holds.
	retained() int
	// daily sums the tenant's minutes > from.
	daily(tenant string, from int64) (requests, tokens, oldest int64, err error)
	window(tenant string, secs, start int64) (reserved, settled int64, err error)
	// insert adds a live hold.
	insert(r *record) error
	// live reports whether id has a live hold; with end, it ends it.
	live(id string, end bool) (bool, error)
	// guard reports whether id ended (a final settlement without a live
	// hold) less than GuardTTL before now; with add, it remembers id as
	// ended now (unless it was already).
	guard(id string, now int64, add bool) (seen bool, err error)
	// addUsage adds to a minute, creating it unless it is older than floor.
	addUsage(tenant string, minute, requests, tokens, floor int64) error
	addSpend(tenant string, secs, start, reserved, settled int64) error
	// commit makes the writes durable. With lazy (the transaction holds
	// only settlements nobody waits for) a ledger may delay the write a
	// little and share it with a later commit; the writes are visible at
	// once either way.
	commit(lazy bool) error
	rollback()
}

// local is a Store over in-process buckets and a ledger. Lock order: mu,
// then the buckets' own lock.
type local struct {
	buckets limit.Buckets
	mu      sync.Mutex // guards the ledger and closed
	led     ledger
	closed  bool
	// group, when set, is the ledger's single committer: admissions and
	// settlements that arrive together share one transaction (SQLite). A
	// memory ledger has none: each call applies on its own.
	group *committer
}

var errClosed = errors.New("store: closed")

func newLocal(led ledger) *local { return &local{buckets: limit.NewMemory(), led: led} }

// op is one admission, settlement or usage read on its way through the
// ledger.
type op struct {
	a   *Admission
	st  *Settlement
	q   *UsageQuery
	d   *Decision
	rep *UsageReport
	// taken: the admission's bucket debits are applied (refunded if its
	// transaction does not commit).
	taken bool
	// stale: the settlement found its attempt already ended (a repeat):
	// it changed nothing, and its bucket corrections are not applied.
	stale bool
	err   error
	done  chan struct{}
	// then, when set, is called with the outcome instead of done being
	// closed: nobody waits (SettleAsync).
	then func(error)
	// lead: the caller was handed the committer's lead (see committer).
	lead bool
}

func (o *op) now() time.Time {
	switch {
	case o.a != nil:
		return o.a.Now
	case o.st != nil:
		return o.st.Now
	case o.q != nil:
		return o.q.Now
	}
	return time.Time{}
}

// Admit implements Store. Rate debits, the daily count and the spend hold
// are one decision: the buckets are checked and debited while the ledger
// decides, and the ledger's writes are committed before Admit returns.
func (s *local) Admit(_ context.Context, a *Admission) (*Decision, error) {
	o := &op{a: a}
	s.do(o)
	return o.d, o.err
}

// Settle implements Store. Either the whole settlement applies or (on an
// error) none of it: the reservation then stays.
func (s *local) Settle(_ context.Context, st *Settlement) error {
	o := &op{st: st}
	s.do(o)
	return o.err
}

// SettleAsync implements AsyncSettler: with a committer the settlement is
// queued and done runs after its transaction; without one (memory) it
// applies at once.
func (s *local) SettleAsync(st *Settlement, done func(error)) {
	if s.group == nil {
		done(s.Settle(context.Background(), st))
		return
	}
	s.group.enqueue(&op{st: st, then: done})
}

// do applies o: through the committer when there is one, else at once.
func (s *local) do(o *op) {
	if s.group != nil {
		s.group.submit(o)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apply([]*op{o})
}

// apply runs ops in one transaction, in order; s.mu is held. When the
// transaction fails, each op is retried alone, so that one bad op cannot
// fail the others.
func (s *local) apply(ops []*op) {
	if s.closed {
		for _, o := range ops {
			o.err = errClosed
		}
		return
	}
	err := s.applyTx(ops)
	if err == nil {
		return
	}
	if len(ops) == 1 {
		ops[0].err = err
		return
	}
	for _, o := range ops {
		o.d, o.err, o.stale = nil, nil, false
		if err := s.applyTx([]*op{o}); err != nil {
			o.err = err
		}
	}
}

// applyTx decides and writes ops in one ledger transaction. On an error
// nothing of it stays: the transaction rolls back and the bucket debits
// taken in it are refunded.
func (s *local) applyTx(ops []*op) (err error) {
	// No deadline: a cancellable context costs the SQLite driver a
	// goroutine per statement, and nothing here waits on another party
	// (the process holds the file's lock; busy_timeout bounds the wait for
	// it at open). What remains is local disk I/O, which no context stops.
	tx, err := s.led.begin(context.Background())
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tx.rollback()
			s.refund(ops)
		}
	}()
	var now time.Time
	admissions := 0
	lazy := true
	for _, o := range ops {
		if t := o.now(); t.After(now) {
			now = t
		}
		if o.a != nil {
			admissions++
		}
		lazy = lazy && o.st != nil && o.then != nil
	}
	if admissions > 0 {
		if err := tx.reclaim(now.Unix(), reclaimBatch*admissions); err != nil {
			return err
		}
	}
	for _, o := range ops {
		switch {
		case o.a != nil:
			err = s.admitTx(tx, o)
		case o.st != nil:
			o.stale, err = settleTx(tx, o.st)
		case o.q != nil:
			o.rep, err = usageTx(tx, *o.q)
		}
		if err != nil {
			return err
		}
	}
	if err := tx.commit(lazy); err != nil {
		return err
	}
	for _, o := range ops {
		if o.st != nil && !o.stale {
			for _, d := range o.st.Adjust {
				s.buckets.Adjust(o.st.Now, d, d.Cost)
			}
		}
	}
	return nil
}

// refund returns the bucket debits of admissions whose transaction failed.
func (s *local) refund(ops []*op) {
	for _, o := range ops {
		if !o.taken {
			continue
		}
		o.taken, o.d = false, nil
		for _, d := range o.a.Debits {
			if d.Rate.Limited() {
				s.buckets.Adjust(o.a.Now, d, -min(max(d.Cost, 0), d.Rate.Limit))
			}
		}
	}
}

// admitTx decides one admission inside tx. A refusal writes nothing.
func (s *local) admitTx(tx ledgerTx, o *op) error {
	a := o.a
	d := &Decision{Minute: Minute(a.Now), WindowStart: WindowStart(a.Now, a.WindowSecs)}
	var err error
	res := s.buckets.Take(a.Now, a.Debits, func() bool {
		var ok bool
		ok, err = decide(tx, a, d)
		return ok && err == nil
	})
	if err != nil {
		return err
	}
	o.d = d
	if res.Refused >= 0 {
		d.Refused, d.Index, d.Snapshot, d.Wait = RefusedRate, res.Refused, res.Snapshot, res.Snapshot.Wait
		return nil
	}
	o.taken = res.Committed
	d.Snapshots = res.Snapshots
	return nil
}

// decide runs the ledger part of an admission in tx; false is a refusal
// (d says which, and nothing was written) or an error.
func decide(tx ledgerTx, a *Admission, d *Decision) (bool, error) {
	reqs, _, oldest, err := tx.daily(a.Tenant, d.Minute-DailyMinutes)
	if err != nil {
		return false, err
	}
	if !a.NoCount && a.DailyLimit >= 0 && reqs+1 > a.DailyLimit {
		d.Refused = RefusedDaily
		d.Daily = limit.Snapshot{Limit: a.DailyLimit, Remaining: 0}
		d.Wait = 86400 * time.Second
		if reqs > 0 {
			d.Wait = max(DailyExpiry(oldest).Sub(a.Now), time.Second)
		}
		d.Daily.Reset, d.Daily.Wait = d.Wait, d.Wait
		return false, nil
	}
	// Only a budgeted attempt holds money that must be settled exactly
	// once, so only it takes a live hold; when they are all taken it is
	// refused (fail closed), never admitted without one.
	d.Recorded = a.Budgeted
	if a.Budgeted && tx.retained() >= a.MaxRetained {
		d.Refused = RefusedFull
		return false, nil
	}
	reserved, settled, err := tx.window(a.Tenant, a.WindowSecs, d.WindowStart)
	if err != nil {
		return false, err
	}
	spent := reserved + settled
	hold := max(a.Hold, 0)
	if a.Budgeted {
		if a.HoldRemaining {
			hold = a.Budget - spent
		}
		if a.Budget == 0 || (a.HoldRemaining && hold <= 0) || spent+hold > a.Budget {
			d.Refused = RefusedBudget
			d.Wait = max(time.Unix(d.WindowStart+a.WindowSecs, 0).Sub(a.Now), time.Second)
			d.Spent = spent
			return false, nil
		}
	}
	if d.Recorded {
		exp := max(a.Now.Unix(), d.WindowStart+a.WindowSecs) + int64(Retention/time.Second)
		err = tx.insert(&record{ID: a.ID, Tenant: a.Tenant, Created: a.Now, WindowSecs: a.WindowSecs,
			WindowStart: d.WindowStart, Held: hold, Expires: exp})
		if err != nil {
			return false, err
		}
	}
	counted := int64(1)
	if a.NoCount {
		counted = 0
	}
	if counted != 0 || a.EstTokens != 0 {
		if err := tx.addUsage(a.Tenant, d.Minute, counted, a.EstTokens, d.Minute-DailyMinutes); err != nil {
			return false, err
		}
	}
	if err := tx.addSpend(a.Tenant, a.WindowSecs, d.WindowStart, hold, 0); err != nil {
		return false, err
	}
	reqs += counted
	if reqs > 0 && oldest == 0 {
		oldest = d.Minute
	}
	d.Held, d.Spent = hold, spent+hold
	d.Daily = limit.Snapshot{Limit: a.DailyLimit, Remaining: max(a.DailyLimit-reqs, 0)}
	if reqs > 0 {
		d.Daily.Reset = DailyExpiry(oldest).Sub(a.Now)
	}
	if a.DailyLimit < 0 {
		d.Daily = limit.Snapshot{Limit: limit.Unlimited, Remaining: 0}
	}
	return true, nil
}

// settleTx writes one settlement inside tx (its bucket corrections follow
// the commit). stale: the attempt had already ended, and nothing was
// written. Ending the live hold (or noting the id in the guard) and
// applying the amounts are one transaction, so a settlement applies once.
func settleTx(tx ledgerTx, st *Settlement) (stale bool, err error) {
	var ok bool
	if st.Recorded {
		ok, err = tx.live(st.ID, st.Final)
	} else {
		var seen bool
		seen, err = tx.guard(st.ID, st.Now.Unix(), st.Final)
		ok = !seen
	}
	if err != nil || !ok {
		return !ok, err
	}
	if st.ReservedDelta != 0 || st.SettledDelta != 0 {
		if err := tx.addSpend(st.Tenant, st.WindowSecs, st.WindowStart, st.ReservedDelta, st.SettledDelta); err != nil {
			return false, err
		}
	}
	if st.TokenDelta != 0 || st.RequestDelta != 0 {
		if err := tx.addUsage(st.Tenant, st.Minute, st.RequestDelta, st.TokenDelta, Minute(st.Now)-DailyMinutes); err != nil {
			return false, err
		}
	}
	return false, nil
}

// Penalize implements Store.
func (s *local) Penalize(_ context.Context, now time.Time, group string, until time.Time) error {
	s.buckets.Penalize(now, group, until)
	return nil
}

// Peek implements Store.
func (s *local) Peek(_ context.Context, now time.Time, ds []limit.Debit) ([]limit.Snapshot, error) {
	out := make([]limit.Snapshot, len(ds))
	for i, d := range ds {
		out[i] = s.buckets.Peek(now, d)
	}
	return out, nil
}

// Usage implements Store. It goes through the committer like the writes,
// so it sees every settlement queued before it.
func (s *local) Usage(_ context.Context, q UsageQuery) (*UsageReport, error) {
	o := &op{q: &q}
	s.do(o)
	return o.rep, o.err
}

// usageTx reads a tenant's counters inside tx.
func usageTx(tx ledgerTx, q UsageQuery) (*UsageReport, error) {
	r := &UsageReport{WindowStart: WindowStart(q.Now, q.WindowSecs)}
	r.WindowEnd = r.WindowStart + max(q.WindowSecs, 1)
	var err error
	if r.Requests, r.Tokens, r.OldestMinute, err = tx.daily(q.Tenant, Minute(q.Now)-DailyMinutes); err != nil {
		return nil, err
	}
	if r.Reserved, r.Settled, err = tx.window(q.Tenant, q.WindowSecs, r.WindowStart); err != nil {
		return nil, err
	}
	return r, nil
}

// LiveHolds implements HoldCounter.
func (s *local) LiveHolds(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed
	}
	tx, err := s.led.begin(context.Background())
	if err != nil {
		return 0, err
	}
	defer tx.rollback()
	return int64(tx.retained()), nil
}

// Close implements Store. Operations already queued are applied first.
func (s *local) Close() error {
	if s.group != nil {
		s.group.close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.led.close()
}
