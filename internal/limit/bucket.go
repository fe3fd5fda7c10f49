// Package limit holds the admission primitives: token buckets behind the
// Buckets interface (a memory implementation here; shared backends such as
// Redis implement the same contract with one atomic script), a concurrency
// gate with a bounded queue wait, and the conservative token estimate used
// for TPM admission.
//
// Time is always passed in: nothing here reads a clock, so tests drive
// every decision with fixed instants.
package limit

import (
	"math"
	"sync"
	"time"
)

// Unlimited is a Rate.Limit without a limit.
const Unlimited int64 = -1

// Rate is a bucket of Limit units that refills Limit units per Window,
// continuously. Limit < 0 is unlimited; Limit == 0 denies everything.
type Rate struct {
	Limit  int64
	Window time.Duration
	// Sliding counts admissions in the last Window instead of refilling
	// a bucket continuously (see sliding.go).
	Sliding bool
}

// Limited reports whether the rate constrains anything.
func (r Rate) Limited() bool { return r.Limit >= 0 }

// perNs is the refill per nanosecond.
func (r Rate) perNs() float64 { return float64(r.Limit) / float64(r.Window) }

// Debit asks one bucket for Cost units. Key names the bucket and must be
// stable across config reloads ("g:rpm", "p:openai:tpm", "t:acme:rpm");
// Group, when set, names the penalty group the bucket belongs to
// ("p:openai"). A cost above the bucket's capacity is clamped to it: such a
// request waits for a full bucket and then empties it, instead of being
// refused forever.
type Debit struct {
	Key   string
	Group string
	Rate  Rate
	Cost  int64
}

// Snapshot is one counter as a decision saw it.
type Snapshot struct {
	// Limit is the capacity; Unlimited when the counter has none.
	Limit int64
	// Remaining whole units (after the debit, for an admission).
	Remaining int64
	// Reset is the time until the bucket is full again.
	Reset time.Duration
	// Wait is, for a refusal, the time until the debit would fit.
	Wait time.Duration
	// Penalized is set when a penalty, not the level, refused.
	Penalized bool
}

// Result is the outcome of Take: Refused is the index of the first debit
// that did not fit (-1 when every one did, or when commit declined), Wait
// its wait, Snapshots one per debit (after debiting when admitted).
type Result struct {
	Refused   int
	Snapshot  Snapshot
	Snapshots []Snapshot
	// Committed is false when the buckets fitted but commit declined.
	Committed bool
}

// Buckets is a set of token buckets keyed by name.
type Buckets interface {
	// Take debits every d in ds or none. When every debit fits, commit runs
	// (while the decision still holds: nothing else may debit these
	// buckets meanwhile); only if it returns true are the debits applied.
	// commit may be nil.
	Take(now time.Time, ds []Debit, commit func() bool) Result
	// Adjust corrects a past debit by delta units (negative refunds).
	Adjust(now time.Time, d Debit, delta int64)
	// Penalize refuses every debit of group until until; a new penalty
	// never shortens a running one.
	Penalize(now time.Time, group string, until time.Time)
	// Peek reports the counter without debiting.
	Peek(now time.Time, d Debit) Snapshot
}

// Memory is an in-process Buckets. The zero value is not usable; call
// NewMemory.
type Memory struct {
	mu        sync.Mutex
	buckets   map[string]*bucket
	slides    map[string]*slide
	penalties map[string]time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
	limit  int64
}

// NewMemory returns an empty set; a bucket starts full.
func NewMemory() *Memory {
	return &Memory{buckets: map[string]*bucket{}, slides: map[string]*slide{}, penalties: map[string]time.Time{}}
}

// level refills b to now under rate r (creating it full) and returns it.
func (m *Memory) level(now time.Time, d Debit) *bucket {
	b := m.buckets[d.Key]
	if b == nil {
		b = &bucket{tokens: float64(d.Rate.Limit), last: now, limit: d.Rate.Limit}
		m.buckets[d.Key] = b
		return b
	}
	if d.Rate.Limit != b.limit {
		// A reload changed the limit: keep what was consumed, within the
		// new capacity.
		used := float64(b.limit) - b.tokens
		b.tokens, b.limit = float64(d.Rate.Limit)-used, d.Rate.Limit
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = math.Min(float64(b.limit), b.tokens+float64(el)*d.Rate.perNs())
		b.last = now
	}
	if b.tokens > float64(b.limit) {
		b.tokens = float64(b.limit)
	}
	return b
}

func clampCost(d Debit) float64 {
	return float64(min(max(d.Cost, 0), d.Rate.Limit))
}

// check evaluates one debit without changing the level.
func (m *Memory) check(now time.Time, d Debit) (ok bool, s Snapshot) {
	if d.Group != "" {
		if until, p := m.penalties[d.Group]; p && until.After(now) {
			s = m.snap(now, d)
			s.Remaining, s.Wait, s.Penalized = 0, until.Sub(now), true
			return false, s
		}
	}
	if !d.Rate.Limited() {
		return true, Snapshot{Limit: Unlimited}
	}
	if d.Rate.Limit == 0 {
		return false, Snapshot{Limit: 0, Wait: d.Rate.Window, Reset: d.Rate.Window}
	}
	if d.Rate.Sliding {
		sl := m.slideOf(now, d)
		cost := int64(clampCost(d))
		if sl.used+cost <= d.Rate.Limit {
			return true, Snapshot{}
		}
		s = sl.snap(now, d.Rate)
		s.Wait = sl.wait(now, d.Rate, cost)
		return false, s
	}
	b := m.level(now, d)
	cost := clampCost(d)
	if b.tokens >= cost {
		return true, Snapshot{}
	}
	wait := time.Duration(math.Ceil((cost - b.tokens) / d.Rate.perNs()))
	s = snapOf(b, d.Rate)
	s.Wait = max(wait, 1)
	return false, s
}

func snapOf(b *bucket, r Rate) Snapshot {
	rem := int64(math.Floor(b.tokens))
	if rem < 0 {
		rem = 0
	}
	reset := time.Duration(math.Ceil((float64(b.limit) - b.tokens) / r.perNs()))
	return Snapshot{Limit: b.limit, Remaining: rem, Reset: max(reset, 0)}
}

func (m *Memory) snap(now time.Time, d Debit) Snapshot {
	switch {
	case !d.Rate.Limited():
		return Snapshot{Limit: Unlimited}
	case d.Rate.Limit == 0:
		return Snapshot{Limit: 0, Reset: d.Rate.Window}
	case d.Rate.Sliding:
		return m.slideOf(now, d).snap(now, d.Rate)
	}
	return snapOf(m.level(now, d), d.Rate)
}

// Take implements Buckets.
func (m *Memory) Take(now time.Time, ds []Debit, commit func() bool) Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, d := range ds {
		if ok, s := m.check(now, d); !ok {
			return Result{Refused: i, Snapshot: s}
		}
	}
	if commit != nil && !commit() {
		return Result{Refused: -1}
	}
	out := make([]Snapshot, len(ds))
	for i, d := range ds {
		switch {
		case d.Rate.Sliding && d.Rate.Limited():
			m.slideOf(now, d).add(now, int64(clampCost(d)))
		case d.Rate.Limited():
			b := m.level(now, d)
			b.tokens -= clampCost(d)
		}
		out[i] = m.snap(now, d)
	}
	return Result{Refused: -1, Snapshots: out, Committed: true}
}

// Adjust implements Buckets. Debt is bounded by one capacity.
func (m *Memory) Adjust(now time.Time, d Debit, delta int64) {
	if !d.Rate.Limited() || d.Rate.Limit == 0 || delta == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if d.Rate.Sliding {
		// Usage above the estimate counts from now; below it, the
		// estimate's excess is taken back.
		if sl := m.slideOf(now, d); delta > 0 {
			sl.add(now, min(delta, d.Rate.Limit))
		} else {
			sl.refund(-delta)
		}
		return
	}
	b := m.level(now, d)
	b.tokens = math.Max(-float64(b.limit), math.Min(float64(b.limit), b.tokens-float64(delta)))
}

// Penalize implements Buckets.
func (m *Memory) Penalize(now time.Time, group string, until time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.penalties[group]; !ok || until.After(cur) {
		m.penalties[group] = until
	}
	// Expired penalties are dropped here, so the map stays as small as the
	// set of recently penalized groups.
	for g, u := range m.penalties {
		if !u.After(now) {
			delete(m.penalties, g)
		}
	}
}

// Peek implements Buckets.
func (m *Memory) Peek(now time.Time, d Debit) Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.snap(now, d)
	if d.Group != "" {
		if until, p := m.penalties[d.Group]; p && until.After(now) {
			s.Remaining, s.Penalized = 0, true
			s.Reset = max(s.Reset, until.Sub(now))
		}
	}
	return s
}
