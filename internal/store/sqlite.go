package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"modernc.org/sqlite" // pure-Go driver "sqlite": no cgo in CI
	sqlite3 "modernc.org/sqlite/lib"
)

// schema is applied at open; every statement is idempotent. A file
// written before schema 2 is migrated by migrate.
const schema = `
CREATE TABLE IF NOT EXISTS holds (
	id           TEXT PRIMARY KEY,
	tenant       TEXT NOT NULL,
	window_secs  INTEGER NOT NULL,
	window_start INTEGER NOT NULL,
	held_nano    INTEGER NOT NULL,
	created_ms   INTEGER NOT NULL,
	expires_s    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS holds_expiry ON holds(expires_s);
CREATE TABLE IF NOT EXISTS settled_ids (
	id        TEXT PRIMARY KEY,
	expires_s INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS settled_ids_expiry ON settled_ids(expires_s);
CREATE TABLE IF NOT EXISTS usage_minutes (
	tenant   TEXT NOT NULL,
	minute   INTEGER NOT NULL,
	requests INTEGER NOT NULL,
	tokens   INTEGER NOT NULL,
	PRIMARY KEY (tenant, minute)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS usage_minutes_minute ON usage_minutes(minute);
CREATE TABLE IF NOT EXISTS spend_windows (
	tenant        TEXT NOT NULL,
	window_secs   INTEGER NOT NULL,
	window_start  INTEGER NOT NULL,
	reserved_nano INTEGER NOT NULL,
	settled_nano  INTEGER NOT NULL,
	PRIMARY KEY (tenant, window_secs, window_start)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
INSERT OR IGNORE INTO meta (k, v) VALUES ('schema', '2');
`

// migrateAttempts moves a schema-1 file's ledger to schema 2. Schema 1
// kept a record of every attempt (settled ones for 24 h); their money is
// already in spend_windows, so only the holds still open and budgeted
// carry over. Kept and unpriced attempts' holds stay in their windows'
// reserved totals, as they always did.
const migrateAttempts = `
INSERT OR IGNORE INTO holds (id, tenant, window_secs, window_start, held_nano, created_ms, expires_s)
	SELECT id, tenant, window_secs, window_start, held_nano, created_ms, expires_s FROM attempts
	WHERE state = 'open' AND budgeted = 1;
DROP TABLE attempts;
UPDATE meta SET v = '2' WHERE k = 'schema';
`

// The ledger's statements, prepared once at open (parsing SQL dominated
// an admission). Counters are written as absolute values: the ledger
// keeps them in memory (see sqlLedger) and writes each changed one once
// per transaction.
const (
	qReclaim   = `DELETE FROM holds WHERE id IN (SELECT id FROM holds WHERE expires_s <= ? LIMIT ?)`
	qMinExpiry = `SELECT MIN(expires_s) FROM holds`
	// The guard forgets expired ids, and the oldest past MaxGuard.
	qGuardExpire  = `DELETE FROM settled_ids WHERE id IN (SELECT id FROM settled_ids WHERE expires_s <= ? LIMIT ?)`
	qGuardTrim    = `DELETE FROM settled_ids WHERE id IN (SELECT id FROM settled_ids ORDER BY expires_s LIMIT ?)`
	qGuardSeen    = `SELECT 1 FROM settled_ids WHERE id = ? AND expires_s > ?`
	qGuardAdd     = `INSERT OR IGNORE INTO settled_ids (id, expires_s) VALUES (?, ?)`
	qGuardRenew   = `UPDATE settled_ids SET expires_s = ? WHERE id = ?`
	qPruneMinutes = `DELETE FROM usage_minutes WHERE (tenant, minute) IN
		(SELECT tenant, minute FROM usage_minutes WHERE minute <= ? LIMIT ?)`
	qPruneWindows = `DELETE FROM spend_windows WHERE (tenant, window_secs, window_start) IN
		(SELECT tenant, window_secs, window_start FROM spend_windows WHERE window_start + window_secs + 172800 < ? LIMIT ?)`
	qMinutes = `SELECT minute, requests, tokens FROM usage_minutes WHERE tenant = ? AND minute > ?`
	qWindow  = `SELECT reserved_nano, settled_nano FROM spend_windows
		WHERE tenant = ? AND window_secs = ? AND window_start = ?`
	qInsert = `INSERT INTO holds (id, tenant, window_secs, window_start, held_nano, created_ms, expires_s)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	qHoldEnd  = `DELETE FROM holds WHERE id = ?`
	qHoldSeen = `SELECT 1 FROM holds WHERE id = ?`
	qPutUsage = `INSERT INTO usage_minutes (tenant, minute, requests, tokens) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant, minute) DO UPDATE SET requests = excluded.requests, tokens = excluded.tokens`
	qPutSpend = `INSERT INTO spend_windows (tenant, window_secs, window_start, reserved_nano, settled_nano)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, window_secs, window_start) DO UPDATE SET
		reserved_nano = excluded.reserved_nano, settled_nano = excluded.settled_nano`
)

var statements = []string{qReclaim, qMinExpiry, qGuardExpire, qGuardTrim, qGuardSeen, qGuardAdd, qGuardRenew, qPruneMinutes,
	qPruneWindows, qMinutes, qWindow, qInsert, qHoldEnd, qHoldSeen, qPutUsage, qPutSpend}

// DSN is the connection string of a SQLite file: exclusive locking (the
// process owns the file: it takes the lock once and keeps it, so WAL needs
// no shared-memory index and a transaction no lock syscalls — they were
// most of a commit's cost — and a second process is refused instead of
// double-counting), WAL journal, a busy timeout, NORMAL sync (a committed
// transaction survives the process being killed; an OS crash may lose the
// last ones, never corrupt the file), and write transactions that take the
// lock at BEGIN. The driver runs busy_timeout first (journal_mode already
// needs the lock) and the rest in alphabetical order, so journal_mode runs
// before locking_mode; no transaction has touched the file by then, and a
// running gateway has no -shm file beside it: the exclusive WAL is in effect.
func DSN(path string) string { return dsn(path, LockWait) }

func dsn(path string, busy time.Duration) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")" +
		"&_pragma=locking_mode(EXCLUSIVE)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

// LockWait bounds how long opening a SQLite file waits for the lock of
// another process that has it open; then the open fails saying so.
const LockWait = 5 * time.Second

// OpenSQLite opens (creating it and its directory) the SQLite store at path.
// The process owns the file (exclusive lock, see DSN): the rate buckets,
// the cached counters and the retained-record count live in it. Writes go
// through a group committer (group.go).
func OpenSQLite(path string) (Store, error) { return openSQLite(path, LockWait, nil) }

// openSQLite first tries the lock without waiting; when another process
// holds it, waiting() is told (so that the wait is not silent) and the
// open waits up to wait for it.
func openSQLite(path string, wait time.Duration, waiting func()) (Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	db, err := openLocked(path, 0)
	if isBusy(err) {
		if waiting != nil {
			waiting()
		}
		db, err = openLocked(path, wait)
	}
	if isBusy(err) {
		return nil, fmt.Errorf("store: %s is locked by another switchboard process (waited %s): "+
			"each process needs its own store.path (or STATE_DIR), or redis.url for a fleet: %w", path, wait, err)
	}
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	// busy_timeout is per connection: the first try's 0 is replaced by the
	// usual bound for the one connection's life.
	if _, err := db.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(wait.Milliseconds(), 10)); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	l := &sqlLedger{db: db, stmts: map[string]*sql.Stmt{}}
	l.forget()
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM holds`).Scan(&l.count); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM settled_ids`).Scan(&l.guarded); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	// Prepared before any transaction: the one connection is then free.
	for _, q := range statements {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("store: prepare: %w", err)
		}
		l.stmts[q] = st
	}
	s := newLocal(l)
	s.group = newCommitter(s)
	return s, nil
}

// openLocked opens path, takes its lock (waiting up to busy for it) and
// applies the schema.
func openLocked(path string, busy time.Duration) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path, busy))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// One connection: decisions are serialized anyway, and a single writer
	// never meets SQLITE_BUSY from itself.
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(context.Background(), schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: init %s: %w", path, err)
	}
	if err := migrate(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrate %s: %w", path, err)
	}
	return db, nil
}

// migrate brings a schema-1 file (an attempts table) to schema 2, in one
// transaction.
func migrate(db *sql.DB) error {
	ctx := context.Background()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'attempts'`).Scan(&n); err != nil || n == 0 {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, migrateAttempts); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// isBusy: err is SQLite's "the file is locked" (by another process: this
// one uses a single connection).
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff // the primary code of an extended one
	return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
}

// sqlLedger is the SQLite ledger. The process owns the file, so the
// counters it decides on (each tenant's minutes, each spend window) are
// read from the file once and then kept in memory, written through: a
// transaction changes the cached values and, at commit, writes each
// changed counter once (one row per tenant-minute and window, however many
// admissions the transaction holds). A rollback forgets the cache, which
// is read again from the file.
type sqlLedger struct {
	db    *sql.DB
	count int // live holds; kept in step with commits
	// guarded is the guard's rows (settled_ids), kept in step with
	// commits: it is trimmed to MaxGuard.
	guarded int
	// stmts are prepared once: parsing SQL dominated an admission.
	stmts map[string]*sql.Stmt
	// sweeps counts reclaims; counters are pruned on every 64th.
	sweeps int

	cache  counters
	loaded map[string]bool // tenants whose minutes are in cache
	// minExpiry: no record expires before it (0: unknown), so that reclaim
	// runs a query only when something may have expired.
	minExpiry int64
	dirtyMin  map[minuteKey]struct{}
	dirtyWin  map[windowKey]struct{}
}

type minuteKey struct {
	tenant string
	minute int64
}

// forget drops the cache (after a rollback, and at open).
func (l *sqlLedger) forget() {
	l.cache, l.loaded, l.minExpiry = newCounters(), map[string]bool{}, 0
	l.dirtyMin, l.dirtyWin = map[minuteKey]struct{}{}, map[windowKey]struct{}{}
}

// stmt returns the prepared statement of q.
func (l *sqlLedger) stmt(q string) (*sql.Stmt, error) {
	if st, ok := l.stmts[q]; ok {
		return st, nil
	}
	return nil, fmt.Errorf("store: statement not prepared: %.40s", q)
}

// begin starts a transaction; the SQL one begins at its first statement,
// so a read served from the cache touches no file.
func (l *sqlLedger) begin(ctx context.Context) (ledgerTx, error) {
	return &sqlTx{l: l, ctx: ctx}, nil
}

func (l *sqlLedger) close() error { return l.db.Close() }

type sqlTx struct {
	l     *sqlLedger
	tx    *sql.Tx
	ctx   context.Context
	delta int // live holds added (removed: negative)
	// guardDelta is the guard rows added (removed: negative).
	guardDelta int
	// wrote: the cache or the file changed, so a rollback must forget.
	wrote bool
	done  bool
}

func (t *sqlTx) sqlTx() (*sql.Tx, error) {
	if t.tx == nil {
		tx, err := t.l.db.BeginTx(t.ctx, nil)
		if err != nil {
			return nil, err
		}
		t.tx = tx
	}
	return t.tx, nil
}

func (t *sqlTx) exec(q string, args ...any) (sql.Result, error) {
	st, err := t.l.stmt(q)
	if err != nil {
		return nil, err
	}
	tx, err := t.sqlTx()
	if err != nil {
		return nil, err
	}
	t.wrote = true
	return tx.StmtContext(t.ctx, st).ExecContext(t.ctx, args...)
}

func (t *sqlTx) query(q string, args ...any) (*sql.Rows, error) {
	st, err := t.l.stmt(q)
	if err != nil {
		return nil, err
	}
	tx, err := t.sqlTx()
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(t.ctx, st).QueryContext(t.ctx, args...)
}

// scanRow runs a one-row query into dest (sql.ErrNoRows when none).
func (t *sqlTx) scanRow(q string, args []any, dest ...any) error {
	st, err := t.l.stmt(q)
	if err != nil {
		return err
	}
	tx, err := t.sqlTx()
	if err != nil {
		return err
	}
	return tx.StmtContext(t.ctx, st).QueryRowContext(t.ctx, args...).Scan(dest...)
}

// commit writes the changed counters, then commits.
func (t *sqlTx) commit() error {
	l := t.l
	for k := range l.dirtyMin {
		if c := l.cache.minutes[k.tenant][k.minute]; c != nil {
			if _, err := t.exec(qPutUsage, k.tenant, k.minute, c[0], c[1]); err != nil {
				return err
			}
		}
	}
	for k := range l.dirtyWin {
		if w := l.cache.windows[k]; w != nil {
			if _, err := t.exec(qPutSpend, k.tenant, k.secs, k.start, w[0], w[1]); err != nil {
				return err
			}
		}
	}
	if t.tx != nil {
		if err := t.tx.Commit(); err != nil {
			return err
		}
	}
	t.done = true
	clear(l.dirtyMin)
	clear(l.dirtyWin)
	l.count += t.delta
	l.guarded += t.guardDelta
	return nil
}

func (t *sqlTx) rollback() {
	if t.done {
		return
	}
	t.done = true
	if t.tx != nil {
		_ = t.tx.Rollback()
	}
	if t.wrote {
		t.l.forget()
	}
}

func (t *sqlTx) reclaim(now int64, n int) error {
	l := t.l
	if l.sweeps++; l.sweeps%64 == 0 {
		// Now and then, counters past any window they could count in.
		if _, err := t.exec(qPruneMinutes, now/60-DailyMinutes-1, 64*n); err != nil {
			return err
		}
		if _, err := t.exec(qPruneWindows, now, 64*n); err != nil {
			return err
		}
		l.cache.pruneWindows(now)
	}
	if err := t.trimGuard(now, n); err != nil {
		return err
	}
	if l.minExpiry > now {
		return nil
	}
	res, err := t.exec(qReclaim, now, n)
	if err != nil {
		return err
	}
	k, _ := res.RowsAffected()
	t.delta -= int(k)
	if int(k) < n {
		var m sql.NullInt64
		if err := t.scanRow(qMinExpiry, nil, &m); err != nil {
			return err
		}
		l.minExpiry = math.MaxInt64
		if m.Valid {
			l.minExpiry = m.Int64
		}
	}
	return nil
}

func (t *sqlTx) retained() int { return t.l.count + t.delta }

// load reads a tenant's minutes after from into the cache, once.
func (t *sqlTx) load(tenant string, from int64) error {
	l := t.l
	if l.loaded[tenant] {
		return nil
	}
	rows, err := t.query(qMinutes, tenant, from)
	if err != nil {
		return err
	}
	defer rows.Close()
	m := map[int64]*[2]int64{}
	for rows.Next() {
		var min, r, k int64
		if err := rows.Scan(&min, &r, &k); err != nil {
			return err
		}
		m[min] = &[2]int64{r, k}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	l.cache.minutes[tenant] = m
	l.loaded[tenant] = true
	return nil
}

func (t *sqlTx) daily(tenant string, from int64) (reqs, toks, oldest int64, err error) {
	if err := t.load(tenant, from); err != nil {
		return 0, 0, 0, err
	}
	return t.l.cache.daily(tenant, from)
}

func (t *sqlTx) window(tenant string, secs, start int64) (reserved, settled int64, err error) {
	k := windowKey{tenant, secs, start}
	if w := t.l.cache.windows[k]; w != nil {
		return w[0], w[1], nil
	}
	err = t.scanRow(qWindow, []any{tenant, secs, start}, &reserved, &settled)
	if errors.Is(err, sql.ErrNoRows) {
		reserved, settled, err = 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	t.l.cache.windows[k] = &[2]int64{reserved, settled}
	return reserved, settled, nil
}

func (t *sqlTx) insert(r *record) error {
	_, err := t.exec(qInsert, r.ID, r.Tenant, r.WindowSecs, r.WindowStart, r.Held, r.Created.UnixMilli(), r.Expires)
	if err == nil {
		t.delta++
		t.l.minExpiry = min(t.l.minExpiry, r.Expires)
	}
	return err
}

func (t *sqlTx) addUsage(tenant string, minute, reqs, toks, floor int64) error {
	if minute <= floor {
		return nil
	}
	if err := t.load(tenant, floor); err != nil {
		return err
	}
	t.wrote = true
	_ = t.l.cache.addUsage(tenant, minute, reqs, toks, floor)
	t.l.dirtyMin[minuteKey{tenant, minute}] = struct{}{}
	return nil
}

func (t *sqlTx) addSpend(tenant string, secs, start, reserved, settled int64) error {
	if _, _, err := t.window(tenant, secs, start); err != nil {
		return err
	}
	t.wrote = true
	_ = t.l.cache.addSpend(tenant, secs, start, reserved, settled)
	t.l.dirtyWin[windowKey{tenant, secs, start}] = struct{}{}
	return nil
}

// live reports (and with end, ends) id's live hold.
func (t *sqlTx) live(id string, end bool) (bool, error) {
	if !end {
		var one int
		err := t.scanRow(qHoldSeen, []any{id}, &one)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	res, err := t.exec(qHoldEnd, id)
	if err != nil {
		return false, err
	}
	k, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	t.delta -= int(k)
	return k == 1, nil
}

// guard reports whether id is remembered; with add it is remembered. A
// new id (the usual case) costs the one INSERT.
func (t *sqlTx) guard(id string, now int64, add bool) (bool, error) {
	until := now + int64(GuardTTL/time.Second)
	if add {
		res, err := t.exec(qGuardAdd, id, until)
		if err != nil {
			return false, err
		}
		k, err := res.RowsAffected()
		if err != nil {
			return false, err
		}
		if k == 1 {
			t.guardDelta++
			return false, nil
		}
	}
	var one int
	err := t.scanRow(qGuardSeen, []any{id, now}, &one)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, err
	case add:
		// Remembered once, expired since: remembered again.
		_, err = t.exec(qGuardRenew, until, id)
	}
	return false, err
}

// trimGuard forgets up to n expired guard ids and, past MaxGuard, the
// oldest.
func (t *sqlTx) trimGuard(now int64, n int) error {
	l := t.l
	if l.guarded+t.guardDelta <= 0 {
		return nil
	}
	res, err := t.exec(qGuardExpire, now, n)
	if err != nil {
		return err
	}
	k, _ := res.RowsAffected()
	t.guardDelta -= int(k)
	if over := l.guarded + t.guardDelta - MaxGuard; over > 0 {
		if res, err = t.exec(qGuardTrim, over); err != nil {
			return err
		}
		k, _ := res.RowsAffected()
		t.guardDelta -= int(k)
	}
	return nil
}
