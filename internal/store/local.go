package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"switchboard/internal/limit"
)

// record is one attempt of the ledger.
type record struct {
	ID, Tenant, Provider, Model string
	Created                     time.Time
	Minute                      int64
	EstTokens                   int64
	Budgeted                    bool
	WindowSecs, WindowStart     int64
	Held, Cost                  int64
	State                       string
	Tokens                      *Tokens
	Expires                     int64 // Unix s after which it may be reclaimed
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
	// reclaim deletes up to n records expired at now, and stale counters.
	reclaim(now int64, n int) error
	retained() int
	// daily sums the tenant's minutes > from.
	daily(tenant string, from int64) (requests, tokens, oldest int64, err error)
	window(tenant string, secs, start int64) (reserved, settled int64, err error)
	insert(r *record) error
	// addUsage adds to a minute, creating it unless it is older than floor.
	addUsage(tenant string, minute, requests, tokens, floor int64) error
	addSpend(tenant string, secs, start, reserved, settled int64) error
	// update rewrites an attempt's outcome and, when expires > 0, its
	// expiry; a missing record is no error.
	update(s *Settlement, expires int64) error
	commit() error
	rollback()
}

// local is a Store over in-process buckets and a ledger.
type local struct {
	buckets limit.Buckets
	mu      sync.Mutex // guards the ledger
	led     ledger
	closed  bool
}

var errClosed = errors.New("store: closed")

func newLocal(led ledger) *local { return &local{buckets: limit.NewMemory(), led: led} }

// Admit implements Store. The bucket set holds its lock while the ledger
// decides, so rate debits, the daily count and the spend hold are one
// decision.
func (s *local) Admit(ctx context.Context, a *Admission) (*Decision, error) {
	d := &Decision{Minute: Minute(a.Now), WindowStart: WindowStart(a.Now, a.WindowSecs)}
	var err error
	res := s.buckets.Take(a.Now, a.Debits, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			err = errClosed
			return false
		}
		var ok bool
		ok, err = s.decide(ctx, a, d)
		return ok && err == nil
	})
	if err != nil {
		return nil, err
	}
	if res.Refused >= 0 {
		d.Refused, d.Index, d.Snapshot, d.Wait = RefusedRate, res.Refused, res.Snapshot, res.Snapshot.Wait
		return d, nil
	}
	d.Snapshots = res.Snapshots
	return d, nil
}

// decide runs the ledger part of an admission; false is a refusal (d says
// which) or an error.
func (s *local) decide(ctx context.Context, a *Admission, d *Decision) (bool, error) {
	tx, err := s.led.begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.rollback()
	now := a.Now.Unix()
	if err := tx.reclaim(now, reclaimBatch); err != nil {
		return false, err
	}
	// A refusal writes nothing but keeps what reclaim freed.
	refuse := func() (bool, error) { return false, tx.commit() }
	reqs, _, oldest, err := tx.daily(a.Tenant, d.Minute-DailyMinutes)
	if err != nil {
		return false, err
	}
	if a.DailyLimit >= 0 && reqs+1 > a.DailyLimit {
		d.Refused = RefusedDaily
		d.Daily = limit.Snapshot{Limit: a.DailyLimit, Remaining: 0}
		d.Wait = 86400 * time.Second
		if reqs > 0 {
			d.Wait = max(DailyExpiry(oldest).Sub(a.Now), time.Second)
		}
		d.Daily.Reset, d.Daily.Wait = d.Wait, d.Wait
		return refuse()
	}
	d.Recorded = tx.retained() < a.MaxRetained
	if !d.Recorded && a.Budgeted {
		d.Refused = RefusedFull
		return refuse()
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
			return refuse()
		}
	}
	exp := now + int64(Retention/time.Second)
	if a.Budgeted {
		exp = max(exp, d.WindowStart+a.WindowSecs+int64(Retention/time.Second))
	}
	if d.Recorded {
		err = tx.insert(&record{ID: a.ID, Tenant: a.Tenant, Provider: a.Provider, Model: a.Model, Created: a.Now,
			Minute: d.Minute, EstTokens: a.EstTokens, Budgeted: a.Budgeted, WindowSecs: a.WindowSecs,
			WindowStart: d.WindowStart, Held: hold, State: StateOpen, Expires: exp})
		if err != nil {
			return false, err
		}
	}
	if err := tx.addUsage(a.Tenant, d.Minute, 1, a.EstTokens, d.Minute-DailyMinutes); err != nil {
		return false, err
	}
	if err := tx.addSpend(a.Tenant, a.WindowSecs, d.WindowStart, hold, 0); err != nil {
		return false, err
	}
	if err := tx.commit(); err != nil {
		return false, err
	}
	if reqs == 0 {
		oldest = d.Minute
	}
	d.Held, d.Spent = hold, spent+hold
	d.Daily = limit.Snapshot{Limit: a.DailyLimit, Remaining: max(a.DailyLimit-reqs-1, 0),
		Reset: DailyExpiry(oldest).Sub(a.Now)}
	if a.DailyLimit < 0 {
		d.Daily = limit.Snapshot{Limit: limit.Unlimited, Remaining: 0}
	}
	return true, nil
}

// Settle implements Store. Either the whole settlement applies or (on an
// error) none of it: the reservation then stays.
func (s *local) Settle(ctx context.Context, st *Settlement) error {
	err := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return errClosed
		}
		tx, err := s.led.begin(ctx)
		if err != nil {
			return err
		}
		defer tx.rollback()
		now := st.Now.Unix()
		if st.ReservedDelta != 0 || st.SettledDelta != 0 {
			if err := tx.addSpend(st.Tenant, st.WindowSecs, st.WindowStart, st.ReservedDelta, st.SettledDelta); err != nil {
				return err
			}
		}
		if st.TokenDelta != 0 {
			if err := tx.addUsage(st.Tenant, st.Minute, 0, st.TokenDelta, Minute(st.Now)-DailyMinutes); err != nil {
				return err
			}
		}
		exp := int64(0)
		if st.Final {
			exp = now + int64(Retention/time.Second)
		}
		if err := tx.update(st, exp); err != nil {
			return err
		}
		return tx.commit()
	}()
	if err != nil {
		return err
	}
	for _, d := range st.Adjust {
		s.buckets.Adjust(st.Now, d, d.Cost)
	}
	return nil
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

// Usage implements Store.
func (s *local) Usage(ctx context.Context, q UsageQuery) (*UsageReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	tx, err := s.led.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.rollback()
	r := &UsageReport{WindowStart: WindowStart(q.Now, q.WindowSecs)}
	r.WindowEnd = r.WindowStart + max(q.WindowSecs, 1)
	if r.Requests, r.Tokens, r.OldestMinute, err = tx.daily(q.Tenant, Minute(q.Now)-DailyMinutes); err != nil {
		return nil, err
	}
	if r.Reserved, r.Settled, err = tx.window(q.Tenant, q.WindowSecs, r.WindowStart); err != nil {
		return nil, err
	}
	return r, nil
}

// Close implements Store.
func (s *local) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.led.close()
}
