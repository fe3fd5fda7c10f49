package store

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"switchboard/internal/limit"
)

// One group transaction whose second admission cannot be written (its id
// is taken) fails alone: the batch is rolled back and each operation is
// applied on its own, so the others are admitted and settled once, the
// failed one debits no bucket and no counter, and the counters on file
// agree with the cache after a reopen.
func TestGroupCommitIsolatesAFailedOperation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	st, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*local)
	rpm := limit.Debit{Key: "t:acme:rpm", Rate: limit.Rate{Limit: 10, Window: time.Minute}, Cost: 1}
	mk := func(id string) *Admission {
		return adm(t0, "acme", func(a *Admission) {
			a.ID, a.Debits = id, []limit.Debit{rpm}
			a.Budgeted, a.Budget, a.Hold, a.EstTokens = true, 10_000, 1000, 40
		})
	}
	a1, dup, a3 := mk("same"), mk("same"), mk("other")
	set := &Settlement{Now: t0, ID: "same", Tenant: "acme", Minute: Minute(t0), WindowSecs: 3600,
		WindowStart: WindowStart(t0, 3600), ReservedDelta: -1000, SettledDelta: 300, TokenDelta: -10,
		Recorded: true, Final: true}
	ops := []*op{{a: a1}, {a: dup}, {a: a3}, {st: set}}
	s.mu.Lock()
	s.apply(ops)
	s.mu.Unlock()
	for i, want := range []bool{true, false, true} {
		o := ops[i]
		if got := o.err == nil && o.d != nil && o.d.Refused == Admitted; got != want {
			t.Errorf("op %d: admitted %v (err %v, decision %+v), want %v", i, got, o.err, o.d, want)
		}
	}
	if ops[3].err != nil {
		t.Errorf("settlement: %v", ops[3].err)
	}
	check := func(when string, s Store) {
		t.Helper()
		r := usage(t, s, t0, "acme")
		// Two admissions of 40 tokens, one corrected by -10; 1000 held by
		// the open one, 300 settled by the other.
		if r.Requests != 2 || r.Tokens != 70 || r.Reserved != 1000 || r.Settled != 300 {
			t.Errorf("%s: usage %+v", when, r)
		}
	}
	check("after the batch", s)
	if sn, _ := s.Peek(ctx, t0, []limit.Debit{rpm}); sn[0].Remaining != 8 {
		t.Errorf("rpm remaining %d, want 8 (the failed admission's debit refunded)", sn[0].Remaining)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	check("after a reopen", again)
}

// Concurrent admissions share transactions and still hold a budget to
// the nano-USD (each sees the ones committed or batched before it).
func TestGroupCommitBudgetUnderConcurrency(t *testing.T) {
	st, err := OpenSQLite(filepath.Join(t.TempDir(), "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := st.Admit(ctx, adm(t0, "acme", func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 50_000, 1000 }))
			if err != nil {
				t.Error(err)
				return
			}
			if d.Refused == Admitted {
				mu.Lock()
				admitted++
				mu.Unlock()
			} else if d.Refused != RefusedBudget {
				t.Errorf("refusal %+v", d)
			}
		}()
	}
	wg.Wait()
	if r := usage(t, st, t0, "acme"); admitted != 50 || r.Reserved != 50_000 || r.Requests != 50 {
		t.Errorf("admitted %d, usage %+v; want 50 admissions holding 50000", admitted, r)
	}
	if g := st.(*local).group; g.ops.Load() <= g.txs.Load() {
		t.Logf("no transaction held more than one operation (%d ops in %d)", g.ops.Load(), g.txs.Load())
	}
}

// A second process (here: a second open) cannot take a ledger file that
// is in use: it is told at once that it waits (the waiting callback, which
// Open turns into a log line), and refused after the bounded wait with a
// message saying why, rather than counting beside the first. A free file
// is opened without any wait being announced.
func TestSQLiteFileHasOneOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	waits := 0
	first, err := openSQLite(path, LockWait, func() { waits++ })
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if waits != 0 {
		t.Fatalf("a free file announced %d waits", waits)
	}
	admit(t, first, adm(t0, "acme"))
	_, err = openSQLite(path, 50*time.Millisecond, func() { waits++ })
	if err == nil || !strings.Contains(err.Error(), "locked by another switchboard process (waited 50ms)") ||
		!strings.Contains(err.Error(), "store.path") {
		t.Fatalf("second open: %v", err)
	}
	if waits != 1 {
		t.Fatalf("the wait was announced %d times, want once before waiting", waits)
	}
}

// When the holder lets go during the wait, the waiting open gets the file
// (with what the holder wrote) instead of failing.
func TestSQLiteWaitsForTheLockHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	first, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	admit(t, first, adm(t0, "acme", func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 100, 1 }))
	released := false
	// The holder closes as the wait is announced, so the wait that
	// follows ends at once; no sleep decides the order.
	second, err := openSQLite(path, 10*time.Second, func() {
		released = true
		if err := first.Close(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatalf("open after the holder let go: %v", err)
	}
	defer second.Close()
	if !released {
		t.Fatal("the held file was opened without announcing a wait")
	}
	if n, _ := second.(HoldCounter).LiveHolds(ctx); n != 1 {
		t.Fatalf("%d live holds, want the holder's 1", n)
	}
}

// Close applies what is queued and refuses what comes after.
func TestGroupCommitClose(t *testing.T) {
	st, err := OpenSQLite(filepath.Join(t.TempDir(), "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	admit(t, st, adm(t0, "acme"))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Admit(ctx, adm(t0, "acme")); err == nil {
		t.Error("admitted after close")
	}
	if err := st.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}
