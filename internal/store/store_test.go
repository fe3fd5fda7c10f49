package store

import (
	"context"
	"database/sql"
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

// backends runs a test against every implementation: memory, SQLite and
// (when redis-server is installed) Redis.
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
		first := adm(t0, "a", b(600))
		d := admit(t, s, first)
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
		err := s.Settle(ctx, &Settlement{Now: t0, ID: first.ID, Tenant: "a", Minute: Minute(t0), WindowSecs: 3600,
			WindowStart: d.WindowStart, ReservedDelta: -600, SettledDelta: 250, TokenDelta: 5, Recorded: true, Final: true})
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

// Live holds are bounded (budgeted attempts refused when full), a
// settlement ends its hold at once, and a hold whose attempt never ended
// is reclaimed 24 h after its window's end; its money stays in the
// window.
func TestLiveHolds(t *testing.T) {
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
		if n, _ := s.(HoldCounter).LiveHolds(ctx); n != 2 {
			t.Fatalf("%d live holds, want 2", n)
		}
		// Settling the first ends its hold: room at once.
		if err := s.Settle(ctx, &Settlement{Now: t0, ID: a1.ID, Tenant: "a", Minute: Minute(t0), WindowSecs: 3600,
			WindowStart: WindowStart(t0, 3600), ReservedDelta: -1, SettledDelta: 1, Recorded: true, Final: true}); err != nil {
			t.Fatal(err)
		}
		if d := admit(t, s, adm(t0, "a", capped(true))); d.Refused != Admitted || !d.Recorded {
			t.Fatalf("no room after a settlement: %+v", d)
		}
		// The open ones live until their window's end + 24 h.
		end := time.Unix(WindowStart(t0, 3600)+3600, 0).Add(Retention)
		if d := admit(t, s, adm(end.Add(-time.Second), "a", capped(true))); d.Refused != RefusedFull {
			t.Errorf("open hold reclaimed early: %+v", d)
		}
		if d := admit(t, s, adm(end, "a", capped(true))); d.Refused != Admitted {
			t.Errorf("open hold not reclaimed: %+v", d)
		}
		// Reclaiming a hold releases no money: its window keeps it (the
		// two open holds and the unbudgeted attempt's 1).
		if r := usage(t, s, t0, "a"); r.Reserved != 3 || r.Settled != 1 {
			t.Errorf("window after reclaim: %+v", r)
		}
	})
}

// A settlement applies at most once: repeated (a retry, a replay), or
// after its attempt ended, it changes nothing, whether the attempt had a
// live hold or only the guard remembers it.
func TestSettlementAppliesOnce(t *testing.T) {
	backends(t, func(t *testing.T, open func() Store) { settlesOnce(t, open()) })
}

func settlesOnce(t *testing.T, s Store) {
	{
		rpm := limit.Debit{Key: "t:a:tpm", Rate: limit.Rate{Limit: 1000, Window: time.Hour}, Cost: 100}
		budgeted := adm(t0, "a", func(a *Admission) {
			a.Budgeted, a.Budget, a.Hold, a.Debits = true, 1e9, 1000, []limit.Debit{rpm}
		})
		d := admit(t, s, budgeted)
		settle := func(id string, recorded, final bool, reserved, settled int64) {
			t.Helper()
			adj := rpm
			adj.Cost = -50
			if err := s.Settle(ctx, &Settlement{Now: t0, ID: id, Tenant: "a", Minute: d.Minute, WindowSecs: 3600,
				WindowStart: d.WindowStart, ReservedDelta: reserved, SettledDelta: settled, TokenDelta: -5,
				Adjust: []limit.Debit{adj}, Recorded: recorded, Final: final}); err != nil {
				t.Fatal(err)
			}
		}
		remaining := func() int64 {
			sn, _ := s.Peek(ctx, t0, []limit.Debit{rpm})
			return sn[0].Remaining
		}
		settle(budgeted.ID, true, false, 200, 0) // a partial raise: applies
		settle(budgeted.ID, true, true, -1200, 700)
		settle(budgeted.ID, true, true, -1200, 700) // the same again
		settle(budgeted.ID, true, false, 500, 0)    // a partial after the end
		if r := usage(t, s, t0, "a"); r.Reserved != 0 || r.Settled != 700 || r.Tokens != 0 {
			t.Fatalf("recorded attempt settled twice: %+v", r)
		}
		if rem := remaining(); rem != 1000 {
			t.Fatalf("bucket corrected %d times: remaining %d", (rem-900)/50, rem)
		}

		plain := adm(t0, "a")
		admit(t, s, plain)
		settle(plain.ID, false, true, 0, 30)
		settle(plain.ID, false, true, 0, 30)
		settle(plain.ID, false, false, 0, 30)
		if r := usage(t, s, t0, "a"); r.Settled != 730 {
			t.Fatalf("unrecorded attempt settled more than once: %+v", r)
		}
	}
}

func TestGuardRingIsBounded(t *testing.T) {
	g := newGuardRing(3)
	now := t0.Unix()
	for i := range 5 {
		if g.seen(fmt.Sprint(i), now, true) {
			t.Fatalf("%d seen before it was added", i)
		}
	}
	if len(g.until) != 3 || len(g.ring) != 3 {
		t.Fatalf("guard holds %d ids in %d slots, want 3", len(g.until), len(g.ring))
	}
	if g.seen("1", now, false) || !g.seen("4", now, false) {
		t.Fatal("the oldest ids are not the ones forgotten")
	}
	if g.seen("4", now+int64(GuardTTL/time.Second), false) {
		t.Fatal("an id outlived GuardTTL")
	}
	// An id remembered again is not forgotten with its older slot.
	g.seen("2", now+int64(GuardTTL/time.Second), true)
	g.seen("x", now, true)
	if !g.seen("2", now+int64(GuardTTL/time.Second), false) {
		t.Fatal("a renewed id was forgotten with its old slot")
	}
}

// A schema-1 file (a record per attempt) opens as schema 2: its open,
// budgeted records become live holds, the rest goes, and the counters
// are untouched.
func TestSQLiteMigratesAttemptRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	exp := t0.Unix() + 86400
	for _, q := range []string{
		`CREATE TABLE attempts (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL,
			created_ms INTEGER NOT NULL, minute INTEGER NOT NULL, est_tokens INTEGER NOT NULL,
			input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER, cache_write_tokens INTEGER,
			reasoning_tokens INTEGER, budgeted INTEGER NOT NULL, window_secs INTEGER NOT NULL, window_start INTEGER NOT NULL,
			held_nano INTEGER NOT NULL, cost_nano INTEGER NOT NULL DEFAULT 0, state TEXT NOT NULL, expires_s INTEGER NOT NULL)`,
		`CREATE TABLE spend_windows (tenant TEXT NOT NULL, window_secs INTEGER NOT NULL, window_start INTEGER NOT NULL,
			reserved_nano INTEGER NOT NULL, settled_nano INTEGER NOT NULL, PRIMARY KEY (tenant, window_secs, window_start)) WITHOUT ROWID`,
		`CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)`,
		`INSERT INTO meta VALUES ('schema', '1')`,
		fmt.Sprintf(`INSERT INTO spend_windows VALUES ('acme', 3600, %d, 500, 900)`, WindowStart(t0, 3600)),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for i, row := range []struct {
		state    string
		budgeted int
	}{{"open", 1}, {"open", 1}, {"open", 0}, {"settled", 1}, {"kept", 1}} {
		if _, err := db.Exec(`INSERT INTO attempts (id, tenant, provider, model, created_ms, minute, est_tokens, budgeted,
			window_secs, window_start, held_nano, state, expires_s) VALUES (?, 'acme', 'p', 'm', 0, 0, 0, ?, 3600, ?, 100, ?, ?)`,
			fmt.Sprint("r", i), row.budgeted, WindowStart(t0, 3600), row.state, exp); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, _ := s.(HoldCounter).LiveHolds(ctx); n != 2 {
		t.Fatalf("%d live holds after migration, want the 2 open budgeted ones", n)
	}
	if r := usage(t, s, t0, "acme"); r.Reserved != 500 || r.Settled != 900 {
		t.Fatalf("window changed by the migration: %+v", r)
	}
	var tables int
	if err := SQLiteDB(s).QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'attempts'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("attempts table left (%d, %v)", tables, err)
	}
	// A migrated hold is settled like any other, once.
	for range 2 {
		if err := s.Settle(ctx, &Settlement{Now: t0, ID: "r0", Tenant: "acme", WindowSecs: 3600, WindowStart: WindowStart(t0, 3600),
			ReservedDelta: -100, SettledDelta: 40, Recorded: true, Final: true}); err != nil {
			t.Fatal(err)
		}
	}
	if r := usage(t, s, t0, "acme"); r.Reserved != 400 || r.Settled != 940 {
		t.Fatalf("migrated hold settled: %+v", r)
	}
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
		Recorded: true, Final: true}); err != nil {
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
