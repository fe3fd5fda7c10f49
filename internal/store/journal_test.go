package store

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// abandon closes a SQLite store's file the way a killed process leaves
// it: no checkpoint, whatever the journal holds stays there.
func abandon(t *testing.T, s Store) {
	t.Helper()
	l := s.(*local)
	l.group.close()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if err := l.led.(*sqlLedger).db.Close(); err != nil {
		t.Fatal(err)
	}
}

func openAt(t *testing.T, path string) Store {
	t.Helper()
	s, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func journalRows(t *testing.T, s Store) int {
	t.Helper()
	var n int
	if err := SQLiteDB(s).QueryRow(`SELECT COUNT(*) FROM journal`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A process killed between checkpoints leaves its decisions in the
// journal only; the next open replays them: the day's count, the
// window's money and the live holds are what they were, and a hold
// left live is still settled exactly once.
func TestJournalReplayAfterKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s := openAt(t, path)
	budget := func(a *Admission) { a.Budgeted, a.Budget, a.Hold, a.EstTokens = true, 10_000, 1000, 40 }
	var live *Admission
	for i := range 5 {
		a := adm(t0, "acme", budget)
		d := admit(t, s, a)
		if i == 4 {
			live = a
			continue
		}
		if err := s.Settle(ctx, &Settlement{Now: t0, ID: a.ID, Tenant: "acme", Minute: d.Minute, WindowSecs: 3600,
			WindowStart: d.WindowStart, ReservedDelta: -1000, SettledDelta: 300, TokenDelta: -15, Recorded: true, Final: true}); err != nil {
			t.Fatal(err)
		}
	}
	before := usage(t, s, t0, "acme")
	if journalRows(t, s) == 0 {
		t.Fatal("nothing in the journal before the kill: the test would not exercise a replay")
	}
	abandon(t, s)

	s = openAt(t, path)
	after := usage(t, s, t0, "acme")
	if *after != *before {
		t.Fatalf("after replay %+v, before the kill %+v", after, before)
	}
	if before.Requests != 5 || before.Reserved != 1000 || before.Settled != 1200 || before.Tokens != 5*40-4*15 {
		t.Fatalf("before the kill: %+v", before)
	}
	if n, _ := s.(HoldCounter).LiveHolds(ctx); n != 1 {
		t.Fatalf("%d live holds after replay, want 1", n)
	}
	if journalRows(t, s) != 0 {
		t.Fatal("the journal was not emptied by the replay")
	}
	for range 2 {
		if err := s.Settle(ctx, &Settlement{Now: t0, ID: live.ID, Tenant: "acme", Minute: Minute(t0), WindowSecs: 3600,
			WindowStart: WindowStart(t0, 3600), ReservedDelta: -1000, SettledDelta: 500, Recorded: true, Final: true}); err != nil {
			t.Fatal(err)
		}
	}
	if r := usage(t, s, t0, "acme"); r.Reserved != 0 || r.Settled != 1700 {
		t.Fatalf("the replayed hold settled: %+v", r)
	}
	// The budget counts everything: 1700 spent, 8300 left.
	if d := admit(t, s, adm(t0, "acme", func(a *Admission) { budget(a); a.Hold = 8301 })); d.Refused != RefusedBudget {
		t.Fatalf("budget after replay: %+v", d)
	}
}

// A checkpoint empties the journal into the tables; a clean close leaves
// no journal at all.
func TestJournalCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s := openAt(t, path)
	for range checkpointRows + 10 {
		admit(t, s, adm(t0, "acme"))
	}
	// One admission a commit: what the journal no longer holds is in
	// the tables.
	rows := journalRows(t, s)
	if rows >= checkpointRows {
		t.Fatalf("%d journal rows: no checkpoint ran", rows)
	}
	var reqs int64
	if err := SQLiteDB(s).QueryRow(`SELECT SUM(requests) FROM usage_minutes WHERE tenant = 'acme'`).Scan(&reqs); err != nil {
		t.Fatal(err)
	}
	if reqs < int64(checkpointRows+10-rows) {
		t.Fatalf("the tables count %d requests, the journal %d rows, of %d admissions", reqs, rows, checkpointRows+10)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	if n := journalRows(t, s); n != 0 {
		t.Fatalf("%d journal rows after a clean close", n)
	}
	if r := usage(t, s, t0, "acme"); r.Requests != checkpointRows+10 {
		t.Fatalf("after reopen: %+v", r)
	}
}

// A damaged journal stops the open with a message saying so, rather than
// losing debits quietly.
func TestJournalDamagedRowRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s := openAt(t, path)
	admit(t, s, adm(t0, "acme"))
	if _, err := SQLiteDB(s).Exec(`INSERT INTO journal (ops) VALUES (x'0205ffffffffffffffffffff')`); err != nil {
		t.Fatal(err)
	}
	abandon(t, s)
	_, err := OpenSQLite(path)
	if err == nil || !strings.Contains(err.Error(), "journal") {
		t.Fatalf("open of a damaged journal: %v", err)
	}
}

// A commit that fails takes its changes back in memory: the refused
// write leaves the counters as they were, and the store serves again
// once the file can be written.
func TestJournalFailedCommitUndone(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "j.db"))
	budget := func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 10_000, 1000 }
	admit(t, s, adm(t0, "acme", budget))
	before := usage(t, s, t0, "acme")
	db := SQLiteDB(s)
	// A trigger makes the journal refuse writes, as a full disk would.
	if _, err := db.Exec(`CREATE TRIGGER refuse BEFORE INSERT ON journal BEGIN SELECT RAISE(FAIL, 'disk full'); END`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(ctx, adm(t0, "acme", budget)); err == nil {
		t.Fatal("admitted although its write failed")
	}
	if after := usage(t, s, t0, "acme"); *after != *before {
		t.Fatalf("a failed admission left %+v, before %+v", after, before)
	}
	if n, _ := s.(HoldCounter).LiveHolds(ctx); n != 1 {
		t.Fatalf("%d live holds after a failed admission, want 1", n)
	}
	if _, err := db.Exec(`DROP TRIGGER refuse`); err != nil {
		t.Fatal(err)
	}
	if d := admit(t, s, adm(t0, "acme", budget)); d.Refused != Admitted {
		t.Fatalf("after the disk recovered: %+v", d)
	}
	if r := usage(t, s, t0, "acme"); r.Requests != 2 || r.Reserved != 2000 {
		t.Fatalf("after the disk recovered: %+v", r)
	}
}

// A settlement nobody waits for is written within lazyDelay even when no
// other write comes to carry it.
func TestJournalLazySettlementFlushed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	s := openAt(t, path)
	a := adm(t0, "acme", func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 10_000, 1000 })
	d := admit(t, s, a)
	rows := journalRows(t, s)
	done := make(chan error, 1)
	s.(AsyncSettler).SettleAsync(&Settlement{Now: t0, ID: a.ID, Tenant: "acme", Minute: d.Minute, WindowSecs: 3600,
		WindowStart: d.WindowStart, ReservedDelta: -1000, SettledDelta: 700, Recorded: true, Final: true}, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for journalRows(t, s) == rows {
		if time.Now().After(deadline) {
			t.Fatal("the settlement was never written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	abandon(t, s)
	s = openAt(t, path)
	if r := usage(t, s, t0, "acme"); r.Reserved != 0 || r.Settled != 700 {
		t.Fatalf("after a kill past the flush: %+v", r)
	}
}

// A file whose tables hold money the ledger never writes (a negative
// total would grant budget; one near the integer limit would wrap) is
// refused at open, naming the table and the tenant.
func TestSQLiteRefusesImpossibleValues(t *testing.T) {
	for _, tc := range []struct{ name, update string }{
		{"negative settled", `UPDATE spend_windows SET settled_nano = -5000000000`},
		{"negative reserved", `UPDATE spend_windows SET reserved_nano = -1`},
		{"near the integer limit", `UPDATE spend_windows SET settled_nano = 9223372036854775807`},
		{"not an integer", `UPDATE spend_windows SET settled_nano = 'abc'`},
		{"negative count", `UPDATE usage_minutes SET requests = -3`},
		{"negative hold", `UPDATE holds SET held_nano = -1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			s := openAt(t, path)
			admit(t, s, adm(t0, "acme", func(a *Admission) { a.Budgeted, a.Budget, a.Hold = true, 10_000, 1000 }))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := db.Exec(tc.update); err != nil {
				t.Fatal(err)
			} else if n, _ := res.RowsAffected(); n == 0 {
				t.Fatal("the update changed nothing")
			}
			db.Close()
			_, err = OpenSQLite(path)
			if err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), `"acme"`) {
				t.Fatalf("open: %v", err)
			}
		})
	}
}
