// Package store keeps admission and spend state: token buckets, each
// tenant's rolling daily counters, the spend of each budget window
// (reserved and settled totals), the live holds of budgeted attempts not
// yet ended, and a short guard of recently ended ones. It never holds
// prompt or response text.
//
// Money needs no record per attempt once it is settled: a settlement
// folds the attempt into its window's totals and ends its live hold. A
// live hold is what makes a settlement apply exactly once: ending it and
// applying the money are one atomic step, so a settlement repeated (or
// replayed after a crash) finds no hold and changes nothing. An attempt
// admitted without a hold (unbudgeted) is remembered after its final
// settlement in a bounded guard (GuardTTL, at most MaxGuard ids) for the
// same purpose.
//
// Store is the contract. One decision (Admit) checks every rate bucket, the
// daily count, the live-hold capacity and the spend hold together and
// applies all of them or none. This package implements it twice over one
// decision procedure: NewMemory keeps everything in the process;
// OpenSQLite decides in memory too, and makes every decision durable in a
// SQLite file before it returns: a journal row per commit, concurrent
// decisions sharing one (group commit), folded into the tables by a
// checkpoint now and then (so they survive a restart); the short-lived
// rate buckets stay in memory. A shared
// backend (Redis) implements Store directly, with the same decision in one
// atomic script.
package store

import (
	"context"
	"time"

	"switchboard/internal/limit"
)

// Rolling-day accounting is kept per minute. A day counts the current
// minute and the DailyMinutes-1 before it, so that an admission leaves the
// count no sooner than 86400 s after it happened.
const (
	DailyMinutes = 1441
	// Retention keeps a live hold whose attempt never ended (its process
	// died) until 24 h after the later of its admission and its window's
	// end; its money stays in the window regardless.
	Retention = 24 * time.Hour
	// GuardTTL and MaxGuard bound the duplicate-settlement guard of
	// attempts admitted without a live hold: an id is remembered for
	// GuardTTL after its final settlement, and at most MaxGuard ids are
	// (the oldest go first).
	GuardTTL = 10 * time.Minute
	MaxGuard = 1 << 16
	// reclaimBatch bounds the expired holds deleted per admission.
	reclaimBatch = 16
)

// Admission is one attempt to decide.
type Admission struct {
	Now time.Time
	// ID identifies the attempt (random, unique).
	ID                      string
	Tenant, Provider, Model string
	// Debits are the rate buckets, in the order refusals are reported
	// (RPM, then TPM).
	Debits []limit.Debit
	// DailyLimit caps the tenant's requests in a rolling day;
	// limit.Unlimited when none (the count is kept anyway).
	DailyLimit int64
	// NoCount: the attempt is not one more request of the tenant's day
	// (its request was counted by an earlier attempt): the daily limit
	// is not checked and the count not raised.
	NoCount bool
	// EstTokens is the TPM estimate, counted in the tenant's tokens today
	// until settlement replaces it.
	EstTokens int64

	// WindowSecs is the tenant's budget window (spend is recorded per
	// window even without a budget).
	WindowSecs int64
	// Budgeted: Budget (nano-USD) caps reserved + settled in the window.
	Budgeted bool
	Budget   int64
	// Hold is the amount to reserve; with HoldRemaining the window's whole
	// remaining balance is reserved instead (unpriced under budget).
	Hold          int64
	HoldRemaining bool
	// MaxRetained bounds the live holds (budgeted attempts admitted and
	// not yet ended); when it is reached a budgeted attempt is refused.
	// An unbudgeted attempt takes no live hold.
	MaxRetained int
}

// Refused says which check refused an admission.
type Refused int

const (
	Admitted Refused = iota
	// RefusedRate: Decision.Index names the debit.
	RefusedRate
	RefusedDaily
	RefusedBudget
	// RefusedFull: the live holds are at capacity (budgeted only).
	RefusedFull
)

// Decision is the outcome of Admit.
type Decision struct {
	Refused Refused
	// Index is the refusing debit for RefusedRate.
	Index int
	// Wait is how long until the refusing check could admit: the bucket's
	// wait, the daily count's next expiry, or the window's end.
	Wait time.Duration
	// Snapshots are the debits' counters after admission; on a rate
	// refusal, Snapshot is the refusing one.
	Snapshots []limit.Snapshot
	Snapshot  limit.Snapshot
	// Daily is the tenant's daily counter (after admission).
	Daily limit.Snapshot
	// Minute is the usage minute the admission was counted in.
	Minute int64
	// WindowStart is the budget window chosen at admission (Unix s).
	WindowStart int64
	// Held is what was reserved; Spent is reserved + settled in the window
	// after the admission.
	Held, Spent int64
	// Recorded: the attempt took a live hold (it is budgeted).
	Recorded bool
}

// Settlement changes an admitted attempt: it carries the deltas to apply
// (the store keeps no per-attempt amounts), and applies at most once per
// attempt (see the package comment).
type Settlement struct {
	Now    time.Time
	ID     string
	Tenant string
	// Minute is where TokenDelta goes (the minute its estimate was
	// counted in).
	Minute                  int64
	WindowSecs, WindowStart int64
	// ReservedDelta is added to the window's reserved amount (negative to
	// release); SettledDelta to its settled amount.
	ReservedDelta, SettledDelta int64
	// TokenDelta corrects the minute's tokens (actual - estimate).
	TokenDelta int64
	// RequestDelta corrects the minute's request count (-1: the request
	// its admission counted was refused after all).
	RequestDelta int64
	// Adjust corrects rate buckets: each debit's Cost is a delta.
	Adjust []limit.Debit
	// Recorded is the admission's Decision.Recorded: the attempt has a
	// live hold, which a Final settlement ends and without which no
	// settlement of it applies.
	Recorded bool
	// Final ends the attempt: whatever it still holds stays in the window
	// (ReservedDelta says what is released), and later settlements of it
	// change nothing.
	Final bool
}

// UsageQuery asks for a tenant's counters.
type UsageQuery struct {
	Now        time.Time
	Tenant     string
	WindowSecs int64
}

// UsageReport is a tenant's rolling day and current window.
type UsageReport struct {
	// Requests and Tokens in the rolling day; Tokens hold estimates until
	// their attempts settle.
	Requests, Tokens int64
	// OldestMinute is the oldest minute still counted (0 when none).
	OldestMinute int64
	// WindowStart and WindowEnd bound the current budget window (Unix s).
	WindowStart, WindowEnd int64
	// Reserved and Settled nano-USD in that window.
	Reserved, Settled int64
}

// Store is the admission and spend state.
type Store interface {
	// Admit decides one attempt atomically; a refusal changes nothing.
	Admit(ctx context.Context, a *Admission) (*Decision, error)
	// Settle applies an attempt's partial or final outcome.
	Settle(ctx context.Context, s *Settlement) error
	// Penalize refuses every debit of group until until.
	Penalize(ctx context.Context, now time.Time, group string, until time.Time) error
	// Peek reads counters without debiting.
	Peek(ctx context.Context, now time.Time, ds []limit.Debit) ([]limit.Snapshot, error)
	// Usage reads a tenant's counters; it never reserves.
	Usage(ctx context.Context, q UsageQuery) (*UsageReport, error)
	Close() error
}

// HoldCounter is a Store that can say how many live holds it keeps (the
// number spend.max_retained_attempts bounds), for a gauge.
type HoldCounter interface {
	LiveHolds(ctx context.Context) (int64, error)
}

// AsyncSettler is a Store that can take a settlement without its caller
// waiting for the write. SettleAsync queues st behind every operation
// queued before it in this process (so a later Usage or Admit here sees
// it) and returns; done runs once with the outcome, on another goroutine,
// and must be short. The SQLite ledger and Redis implement it.
type AsyncSettler interface {
	SettleAsync(st *Settlement, done func(error))
}

// Minute is the usage minute of t.
func Minute(t time.Time) int64 { return t.Unix() / 60 }

// WindowStart is the start of the tumbling window of secs seconds holding t.
func WindowStart(t time.Time, secs int64) int64 {
	if secs <= 0 {
		secs = 86400
	}
	u := t.Unix()
	return u - ((u%secs)+secs)%secs
}

// DailyExpiry is when admissions counted in minute leave the rolling day.
func DailyExpiry(minute int64) time.Time {
	return time.Unix((minute+DailyMinutes)*60, 0)
}
