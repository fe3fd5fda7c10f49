package store

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/limit"
)

var (
	ctx = context.Background()
	t0  = time.Date(2025, 6, 1, 12, 0, 30, 0, time.UTC)
)

// backends runs a test against every local implementation.
func backends(t *testing.T, f func(t *testing.T, open func() Store)) {
	t.Run("memory", func(t *testing.T) { f(t, NewMemory) })
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.db")
		f(t, func() Store {
			s, err := OpenSQLite(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
}

var seq atomic.Int64

func adm(now time.Time, tenant string, mut ...func(*Admission)) *Admission {
	a := &Admission{Now: now, ID: fmt.Sprintf("att-%d", seq.Add(1)), Tenant: tenant, Provider: "p", Model: "m",
		DailyLimit: limit.Unlimited, EstTokens: 10, WindowSecs: 3600, MaxRetained: 1000}
	for _, m := range mut {
		m(a)
	}
	return a
}

func admit(t *testing.T, s Store, a *Admission) *Decision {
	t.Helper()
	d, err := s.Admit(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func usage(t *testing.T, s Store, now time.Time, tenant string) *UsageReport {
	t.Helper()
	r, err := s.Usage(ctx, UsageQuery{Now: now, Tenant: tenant, WindowSecs: 3600})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAdmitConcurrentExactLimit(t *testing.T) {
	backends(t, func(t *testing.T, open func() Store) {
		s := open()
		var ok atomic.Int64
		var wg sync.WaitGroup
		for range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := adm(t0, "acme", func(a *Admission) {
					a.Debits = []limit.Debit{{Key: "t:acme:rpm", Rate: limit.Rate{Limit: 37, Window: time.Minute}, Cost: 1}}
				})
				d, err := s.Admit(ctx, a)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Refused == Admitted {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		if ok.Load() != 37 {
			t.Errorf("admitted %d, want 37", ok.Load())
		}
		if r := usage(t, s, t0, "acme"); r.Requests != 37 || r.Tokens != 370 {
			t.Errorf("usage = %+v", r)
		}
	})
}

func TestRefusalsDebitNothing(t *testing.T) {
	backends(t, func(t *testing.T, open func() Store) {
		s := open()
		rpm := limit.Debit{Key: "g:rpm", Rate: limit.Rate{Limit: 100, Window: time.Minute}, Cost: 1}
		peek := func() int64 {
			sn, _ := s.Peek(ctx, t0, []limit.Debit{rpm})
			return sn[0].Remaining
		}
		// Daily limit 1: the second attempt is refused, and the bucket stays.
		d := admit(t, s, adm(t0, "a", func(a *Admission) { a.Debits, a.DailyLimit = []limit.Debit{rpm}, 1 }))
		if d.Refused != Admitted || d.Daily.Remaining != 0 || d.Daily.Limit != 1 {
			t.Fatalf("first = %+v", d)
		}
		d = admit(t, s, adm(t0, "a", func(a *Admission) { a.Debits, a.DailyLimit = []limit.Debit{rpm}, 1 }))
		if d.Refused != RefusedDaily || d.Wait != DailyExpiry(Minute(t0)).Sub(t0) {
			t.Fatalf("second = %+v", d)
		}
		if peek() != 99 {
			t.Errorf("daily refusal debited the bucket: %d", peek())
		}
		// A budget refusal debits neither the bucket nor the daily count.
		d = admit(t, s, adm(t0, "b", func(a *Admission) {
			a.Debits, a.Budgeted, a.Budget, a.Hold = []limit.Debit{rpm}, true, 100, 101
		}))
		if d.Refused != RefusedBudget || d.Wait != 59*time.Minute+30*time.Second {
			t.Fatalf("budget = %+v", d)
		}
		if peek() != 99 || usage(t, s, t0, "b").Requests != 0 {
			t.Errorf("budget refusal debited")
		}
		// An explicit 0 limit refuses before anything else.
		zero := limit.Debit{Key: "t:c:rpm", Rate: limit.Rate{Limit: 0, Window: time.Minute}, Cost: 1}
		d = admit(t, s, adm(t0, "c", func(a *Admission) { a.Debits = []limit.Debit{rpm, zero} }))
		if d.Refused != RefusedRate || d.Index != 1 || peek() != 99 || usage(t, s, t0, "c").Requests != 0 {
			t.Errorf("zero limit = %+v", d)
		}
	})
}

func TestDailyRolls(t *testing.T) {
	backends(t, func(t *testing.T, open func() Store) {
		s := open()
		lim := func(a *Admission) { a.DailyLimit = 2 }
		admit(t, s, adm(t0, "a", lim))
		d := admit(t, s, adm(t0.Add(time.Hour), "a", lim))
		if d.Refused != Admitted || d.Daily.Remaining != 0 || d.Daily.Reset != DailyExpiry(Minute(t0)).Sub(t0.Add(time.Hour)) {
			t.Fatalf("second = %+v", d)
		}
		if d := admit(t, s, adm(t0.Add(23*time.Hour), "a", lim)); d.Refused != RefusedDaily {
			t.Fatalf("third inside the day = %+v", d)
		}
		// The first leaves no sooner than 86400 s after it was admitted.
		if d := admit(t, s, adm(t0.Add(86400*time.Second), "a", lim)); d.Refused != RefusedDaily {
			t.Fatalf("at exactly one day = %+v", d)
		}
		if d := admit(t, s, adm(DailyExpiry(Minute(t0)), "a", lim)); d.Refused != Admitted {
			t.Fatalf("after expiry = %+v", d)
		}
		// Zero denies.
		if d := admit(t, s, adm(t0, "z", func(a *Admission) { a.DailyLimit = 0 })); d.Refused != RefusedDaily || d.Wait != 86400*time.Second {
			t.Errorf("zero = %+v", d)
		}
	})
}

func TestBudgetWindows(t *testing.T) {
	backends(t, func(t *testing.T, open func() Store) {
		s := open()
		b := func(hold int64) func(*Admission) {
			return func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 1000, hold }
		}
		d := admit(t, s, adm(t0, "a", b(600)))
		if d.Refused != Admitted || d.Held != 600 || d.WindowStart != WindowStart(t0, 3600) {
			t.Fatalf("first = %+v", d)
		}
		if d := admit(t, s, adm(t0, "a", b(401))); d.Refused != RefusedBudget {
			t.Fatalf("over = %+v", d)
		}
		if d := admit(t, s, adm(t0, "a", b(400))); d.Refused != Admitted || d.Spent != 1000 {
			t.Fatalf("exactly to the cap = %+v", d)
		}
		// Settle the first: 600 held becomes 250 settled; 350 frees up.
		err := s.Settle(ctx, &Settlement{Now: t0, ID: "x", Tenant: "a", Minute: Minute(t0), WindowSecs: 3600,
			WindowStart: d.WindowStart, ReservedDelta: -600, SettledDelta: 250, TokenDelta: 5, State: StateSettled, Final: true})
		if err != nil {
			t.Fatal(err)
		}
		if r := usage(t, s, t0, "a"); r.Reserved != 400 || r.Settled != 250 || r.Tokens != 25 {
			t.Fatalf("usage = %+v", r)
		}
		// Unpriced: hold the remaining balance; then nothing is left.
		d = admit(t, s, adm(t0, "a", func(a *Admission) { a.Budgeted, a.Budget, a.HoldRemaining = true, 1000, true }))
		if d.Refused != Admitted || d.Held != 350 {
			t.Fatalf("unpriced = %+v", d)
		}
		if d := admit(t, s, adm(t0, "a", b(0))); d.Refused != Admitted {
			t.Errorf("a zero-cost attempt at the cap = %+v", d)
		}
		if d := admit(t, s, adm(t0, "a", func(a *Admission) { a.Budgeted, a.Budget, a.HoldRemaining = true, 1000, true })); d.Refused != RefusedBudget {
			t.Errorf("unpriced without balance = %+v", d)
		}
		// Rollover: the next window starts empty; the old one keeps its liability.
		next := time.Unix(WindowStart(t0, 3600)+3600, 0)
		if d := admit(t, s, adm(next, "a", b(1000))); d.Refused != Admitted {
			t.Errorf("new window = %+v", d)
		}
		if r := usage(t, s, t0, "a"); r.Reserved != 750 || r.Settled != 250 {
			t.Errorf("old window changed: %+v", r)
		}
		// budget 0 freezes, even at zero cost.
		if d := admit(t, s, adm(t0, "f", func(a *Admission) { a.Budgeted, a.Budget = true, 0 })); d.Refused != RefusedBudget {
			t.Errorf("frozen = %+v", d)
		}
	})
}

func TestRetainedAttempts(t *testing.T) {
	backends(t, func(t *testing.T, open func() Store) {
		s := open()
		capped := func(budgeted bool) func(*Admission) {
			return func(a *Admission) { a.MaxRetained, a.Budgeted, a.Budget, a.Hold = 2, budgeted, 1e9, 1 }
		}
		a1 := adm(t0, "a", capped(true))
		admit(t, s, a1)
		admit(t, s, adm(t0, "a", capped(true)))
		if d := admit(t, s, adm(t0, "a", capped(true))); d.Refused != RefusedFull {
			t.Fatalf("third budgeted = %+v", d)
		}
		if r := usage(t, s, t0, "a"); r.Requests != 2 || r.Reserved != 2 {
			t.Errorf("a refused full admission debited: %+v", r)
		}
		if d := admit(t, s, adm(t0, "a", capped(false))); d.Refused != Admitted || d.Recorded {
			t.Fatalf("unbudgeted when full = %+v", d)
		}
		// Settling the first keeps its record 24 h, then it is reclaimed.
		s.Settle(ctx, &Settlement{Now: t0, ID: a1.ID, Tenant: "a", Minute: Minute(t0), WindowSecs: 3600,
			WindowStart: WindowStart(t0, 3600), ReservedDelta: -1, SettledDelta: 1, State: StateSettled, Final: true})
		if d := admit(t, s, adm(t0.Add(Retention-time.Second), "a", capped(true))); d.Refused != RefusedFull {
			t.Errorf("reclaimed early: %+v", d)
		}
		if d := admit(t, s, adm(t0.Add(Retention), "a", capped(true))); d.Refused != Admitted || !d.Recorded {
			t.Errorf("not reclaimed after 24 h: %+v", d)
		}
		// The open one lives until its window's end + 24 h.
		end := time.Unix(WindowStart(t0, 3600)+3600, 0).Add(Retention)
		if d := admit(t, s, adm(end.Add(-time.Second), "a", capped(true))); d.Refused != RefusedFull {
			t.Errorf("open record reclaimed early: %+v", d)
		}
		if d := admit(t, s, adm(end, "a", capped(true))); d.Refused != Admitted {
			t.Errorf("open record not reclaimed: %+v", d)
		}
	})
}

func TestSQLiteSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "switchboard.db")
	s, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	budget := func(a *Admission) {
		a.DailyLimit, a.Budgeted, a.Budget, a.Hold, a.EstTokens = 3, true, 5000, 1000, 40
	}
	a1 := adm(t0, "acme", budget)
	admit(t, s, a1)
	admit(t, s, adm(t0, "acme", budget))
	if err := s.Settle(ctx, &Settlement{Now: t0, ID: a1.ID, Tenant: "acme", Minute: Minute(t0), WindowSecs: 3600,
		WindowStart: WindowStart(t0, 3600), ReservedDelta: -1000, SettledDelta: 700, TokenDelta: -15,
		State: StateSettled, Tokens: &Tokens{Input: 20, Output: 5}, Cost: 700, Final: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := usage(t, s, t0.Add(time.Minute), "acme")
	if r.Requests != 2 || r.Tokens != 65 || r.Reserved != 1000 || r.Settled != 700 {
		t.Errorf("after reopen: %+v", r)
	}
	// The daily count and the budget keep counting from there.
	admit(t, s, adm(t0, "acme", budget))
	if d := admit(t, s, adm(t0, "acme", budget)); d.Refused != RefusedDaily {
		t.Errorf("daily count forgot the restart: %+v", d)
	}
	d := admit(t, s, adm(t0, "other", func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 5000, 1 }))
	if d.Refused != Admitted {
		t.Errorf("other = %+v", d)
	}
	if d := admit(t, s, adm(t0, "acme", func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 5000, 2301 })); d.Refused != RefusedBudget {
		t.Errorf("spend forgot the restart: %+v", d) // 1000+1000 held + 700 settled + 2301 > 5000
	}
}

func TestOpenRejectsUnwritablePath(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenSQLite(filepath.Join(dir, "x.db", "\x00bad")); err == nil {
		t.Error("no error for a bad path")
	}
}
