package store

import (
	"container/heap"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // pure-Go driver "sqlite": no cgo in CI
	sqlite3 "modernc.org/sqlite/lib"

	"switchboard/internal/visible"
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
-- The journal (journal.go): what each transaction changed since the last
-- checkpoint, replayed into the tables above at open.
CREATE TABLE IF NOT EXISTS journal (
	seq INTEGER PRIMARY KEY,
	ops BLOB NOT NULL
);
-- Schema 2 kept the duplicate-settlement guard here; it lives in memory now.
DROP TABLE IF EXISTS settled_ids;
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
INSERT OR IGNORE INTO meta (k, v) VALUES ('schema', '3');
UPDATE meta SET v = '3' WHERE k = 'schema' AND v = '2';
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

// The ledger's statements, prepared once at open. Counters are written
// as absolute values (the ledger keeps them in memory); holds are
// inserted or replaced, so that replaying a journal twice changes nothing.
const (
	qPruneMinutes = `DELETE FROM usage_minutes WHERE (tenant, minute) IN
		(SELECT tenant, minute FROM usage_minutes WHERE minute <= ? LIMIT ?)`
	qPruneWindows = `DELETE FROM spend_windows WHERE (tenant, window_secs, window_start) IN
		(SELECT tenant, window_secs, window_start FROM spend_windows WHERE window_start + window_secs + 172800 < ? LIMIT ?)`
	qMinutes = `SELECT minute, requests, tokens FROM usage_minutes WHERE tenant = ? AND minute > ?`
	qWindow  = `SELECT reserved_nano, settled_nano FROM spend_windows
		WHERE tenant = ? AND window_secs = ? AND window_start = ?`
	qInsert = `INSERT OR REPLACE INTO holds (id, tenant, window_secs, window_start, held_nano, created_ms, expires_s)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	qHoldEnd  = `DELETE FROM holds WHERE id = ?`
	qPutUsage = `INSERT INTO usage_minutes (tenant, minute, requests, tokens) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant, minute) DO UPDATE SET requests = excluded.requests, tokens = excluded.tokens`
	qPutSpend = `INSERT INTO spend_windows (tenant, window_secs, window_start, reserved_nano, settled_nano)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, window_secs, window_start) DO UPDATE SET
		reserved_nano = excluded.reserved_nano, settled_nano = excluded.settled_nano`
	qJournal      = `INSERT INTO journal (ops) VALUES (?)`
	qJournalClear = `DELETE FROM journal`
)

var statements = []string{qPruneMinutes, qPruneWindows, qMinutes, qWindow, qInsert, qHoldEnd, qPutUsage, qPutSpend,
	qJournal, qJournalClear}

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
	l := newSQLLedger(db)
	if err := l.recover(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
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
	// Runs on a timer's goroutine; the flush itself is applied by the
	// committer under the store's lock.
	l.flush = func() {
		l.flushing.Store(false)
		// An op with nothing to decide: its commit writes what lazy
		// commits left pending.
		s.group.enqueue(&op{then: func(error) {}})
	}
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

// sqlLedger is the SQLite ledger. The process owns the file, so it decides
// in memory: each tenant's minutes and spend windows are read from the
// file once and kept (cache), the live holds are all kept (holds and
// their expiry heap), and the duplicate-settlement guard lives only in
// memory (after a restart nothing settles an attempt of the process
// before). A transaction's changes go to the journal (journal.go) in one
// row at commit; a checkpoint writes them to the tables (see checkpoint).
type sqlLedger struct {
	db *sql.DB
	// stmts are prepared once: parsing SQL dominated an admission.
	stmts map[string]*sql.Stmt

	cache  counters
	loaded map[string]bool // tenants whose minutes are in cache
	holds  map[string]*expiryItem
	expiry expiryHeap
	ids    *guardRing

	// Since the last checkpoint: the counters changed, the holds added
	// and not yet in the holds table (stored), and the stored holds ended.
	dirtyMin map[minuteKey]struct{}
	dirtyWin map[windowKey]struct{}
	newHolds map[string]*expiryItem
	gone     map[string]struct{}
	// rows and bytes are the journal since the last checkpoint; last is
	// when it ran.
	rows, bytes int
	last        time.Time
	checkpoints int
	// now is the latest admission's time (Unix s), for pruning.
	now int64
	// undo is the running transaction's changes to memory, taken back in
	// reverse if it does not commit (reused: transactions never overlap).
	undo []undoEntry
	// buf is the running transaction's journal row; pending is what lazy
	// commits left unwritten (see commit), flush queues its write (set by
	// the store), and flushing says one is on its way.
	buf, pending []byte
	flush        func()
	flushing     atomic.Bool
}

// A checkpoint runs after a commit once the journal holds this many
// rows or bytes, or is this old: it bounds the journal a restart
// replays, and the cost (a transaction over the changed rows) is shared
// by every commit before it.
const (
	checkpointRows  = 2048
	checkpointBytes = 1 << 20
	checkpointAge   = time.Second
	// lazyDelay bounds how long a lazy commit's row waits for a later
	// commit to carry it (see commit).
	lazyDelay = 50 * time.Millisecond
)

type minuteKey struct {
	tenant string
	minute int64
}

// undoEntry is one change to memory of the running transaction.
type undoEntry struct {
	kind   byte // jUsage, jSpend, jHold (added), jEnd (ended); 0: guard id added
	tenant string
	minute int64
	wk     windowKey
	old    [2]int64
	had    bool
	item   *expiryItem
	id     string
	until  int64
}

func newSQLLedger(db *sql.DB) *sqlLedger {
	l := &sqlLedger{db: db, stmts: map[string]*sql.Stmt{}, holds: map[string]*expiryItem{}, ids: newGuardRing(MaxGuard),
		newHolds: map[string]*expiryItem{}, gone: map[string]struct{}{}, last: time.Now()}
	l.forget()
	return l
}

// forget drops the cached counters (at open).
func (l *sqlLedger) forget() {
	l.cache, l.loaded = newCounters(), map[string]bool{}
	l.dirtyMin, l.dirtyWin = map[minuteKey]struct{}{}, map[windowKey]struct{}{}
}

// stmt returns the prepared statement of q.
func (l *sqlLedger) stmt(q string) (*sql.Stmt, error) {
	if st, ok := l.stmts[q]; ok {
		return st, nil
	}
	return nil, fmt.Errorf("store: statement not prepared: %.40s", q)
}

// recover replays the journal a previous process left into the tables
// and empties it, in one transaction, then loads the live holds.
func (l *sqlLedger) recover(ctx context.Context) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, `SELECT seq, ops FROM journal ORDER BY seq`)
	if err != nil {
		return err
	}
	var rowsSeen [][]byte
	var seqs []int64
	for rows.Next() {
		var seq int64
		var b []byte
		if err := rows.Scan(&seq, &b); err != nil {
			rows.Close()
			return err
		}
		seqs, rowsSeen = append(seqs, seq), append(rowsSeen, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i, b := range rowsSeen {
		r := reader{b: b}
		var e entry
		for r.next(&e) {
			if _, err := tx.ExecContext(ctx, replayStatement[e.kind], e.args...); err != nil {
				return err
			}
		}
		if r.err != nil {
			// The journal is money: a damaged row stops the open rather
			// than losing debits quietly.
			return fmt.Errorf("%w (journal seq %d): restore the file or move it aside to start from zero", r.err, seqs[i])
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM journal`); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if err := checkTables(ctx, l.db); err != nil {
		return err
	}
	hr, err := l.db.QueryContext(ctx, `SELECT id, tenant, window_secs, window_start, held_nano, created_ms, expires_s FROM holds`)
	if err != nil {
		return err
	}
	defer hr.Close()
	for hr.Next() {
		r := &record{}
		var created int64
		if err := hr.Scan(&r.ID, &r.Tenant, &r.WindowSecs, &r.WindowStart, &r.Held, &created, &r.Expires); err != nil {
			return err
		}
		r.Created = time.UnixMilli(created)
		e := &expiryItem{r: r, stored: true}
		l.holds[r.ID] = e
		heap.Push(&l.expiry, e)
	}
	return hr.Err()
}

// maxTotal bounds any amount or count the ledger keeps (2^62: about 4.6
// billion USD in nano-USD); a larger, a negative or a non-integer value is
// not something the ledger writes, so it is damage.
const maxTotal = 1 << 62

// checkTables refuses a file whose counters, windows or holds hold a value
// the ledger never writes (negative, past maxTotal, not an integer): the
// gateway would otherwise start with wrong money (a negative total grants
// budget; one near the integer limit wraps).
func checkTables(ctx context.Context, db *sql.DB) error {
	for _, c := range []struct{ table, cols string }{
		{"spend_windows", "reserved_nano, settled_nano, window_secs, window_start"},
		{"usage_minutes", "requests, tokens, minute"},
		{"holds", "held_nano, window_secs, window_start, created_ms, expires_s"},
	} {
		var bad []string
		for _, col := range strings.Split(c.cols, ", ") {
			bad = append(bad, fmt.Sprintf("typeof(%[1]s) != 'integer' OR %[1]s < 0 OR %[1]s > %d", col, int64(maxTotal)))
		}
		var tenant string
		err := db.QueryRowContext(ctx, `SELECT tenant FROM `+c.table+` WHERE `+strings.Join(bad, " OR ")+` LIMIT 1`).Scan(&tenant)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("table %s holds a value the ledger never writes for tenant %q (negative, too large or not an integer): "+
			"the file is damaged; restore it or move it aside to start from zero", c.table, visible.Escape(tenant))
	}
	return nil
}

// begin starts a transaction: memory is changed at once (and taken back
// at rollback); the file is written at commit.
func (l *sqlLedger) begin(ctx context.Context) (ledgerTx, error) {
	l.undo, l.buf = l.undo[:0], l.buf[:0]
	return &sqlTx{l: l, ctx: ctx}, nil
}

// close checkpoints, so that a file closed cleanly has an empty journal.
func (l *sqlLedger) close() error {
	err := l.checkpoint(context.Background())
	return errors.Join(err, l.db.Close())
}

type sqlTx struct {
	l    *sqlLedger
	ctx  context.Context
	done bool
}

// exec runs a prepared statement in tx.
func (l *sqlLedger) exec(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
	st, err := l.stmt(q)
	if err != nil {
		return err
	}
	_, err = tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	return err
}

// scanRow runs a one-row prepared query outside any transaction (the one
// connection is free between transactions: the ledger's own reads come
// only from its transactions, under the store's lock).
func (l *sqlLedger) scanRow(ctx context.Context, q string, args []any, dest ...any) error {
	st, err := l.stmt(q)
	if err != nil {
		return err
	}
	return st.QueryRowContext(ctx, args...).Scan(dest...)
}

// commit appends the transaction's journal row, with whatever earlier
// lazy commits left pending (a transaction that changed nothing writes
// nothing), then checkpoints when one is due. A lazy commit (settlements
// nobody waits for) only leaves its row pending: the next commit or the
// flush at most lazyDelay later writes it. A kill before that loses those
// settlements: their holds stay live, so their reservations stay in their
// windows (the tenant is charged what was held rather than the bill) until
// the holds expire — never less than was spent.
func (t *sqlTx) commit(lazy bool) error {
	l := t.l
	if lazy && len(l.pending)+len(l.buf) < checkpointBytes {
		l.pending = append(l.pending, l.buf...)
		t.done = true
		l.undo, l.buf = l.undo[:0], l.buf[:0]
		if l.flush != nil && l.flushing.CompareAndSwap(false, true) {
			time.AfterFunc(lazyDelay, l.flush)
		}
		return nil
	}
	if n := len(l.pending) + len(l.buf); n > 0 {
		row := l.buf
		if len(l.pending) > 0 {
			row = append(l.pending, l.buf...)
		}
		if _, err := l.stmts[qJournal].ExecContext(t.ctx, row); err != nil {
			if len(l.pending) > 0 {
				// pending may share row's array: keep only what it held.
				l.pending = row[:len(l.pending)]
			}
			return err
		}
		l.rows++
		l.bytes += n
		l.pending = l.pending[:0]
	}
	t.done = true
	l.undo, l.buf = l.undo[:0], l.buf[:0]
	if l.rows >= checkpointRows || l.bytes >= checkpointBytes || (l.rows > 0 && time.Since(l.last) >= checkpointAge) {
		// A failed checkpoint loses nothing: the journal still holds
		// every change, and the next commit tries again.
		_ = l.checkpoint(t.ctx)
	}
	return nil
}

// checkpoint writes what changed since the last one to the tables and
// empties the journal, in one transaction: counters as their values in
// memory, holds added (and still live) inserted, stored holds ended
// deleted. A hold that came and went between two checkpoints never
// reaches the table.
func (l *sqlLedger) checkpoint(ctx context.Context) error {
	l.last = time.Now()
	if l.rows == 0 && len(l.pending) == 0 && len(l.dirtyMin) == 0 && len(l.dirtyWin) == 0 && len(l.newHolds) == 0 && len(l.gone) == 0 {
		return nil
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for k := range l.dirtyMin {
		if c := l.cache.minutes[k.tenant][k.minute]; c != nil {
			if err := l.exec(ctx, tx, qPutUsage, k.tenant, k.minute, c[0], c[1]); err != nil {
				return err
			}
		}
	}
	for k := range l.dirtyWin {
		if w := l.cache.windows[k]; w != nil {
			if err := l.exec(ctx, tx, qPutSpend, k.tenant, k.secs, k.start, w[0], w[1]); err != nil {
				return err
			}
		}
	}
	for _, e := range l.newHolds {
		r := e.r
		if err := l.exec(ctx, tx, qInsert, r.ID, r.Tenant, r.WindowSecs, r.WindowStart, r.Held, r.Created.UnixMilli(), r.Expires); err != nil {
			return err
		}
	}
	for id := range l.gone {
		if err := l.exec(ctx, tx, qHoldEnd, id); err != nil {
			return err
		}
	}
	if l.checkpoints++; l.checkpoints%64 == 0 && l.now > 0 {
		// Now and then, counters past any window they could count in
		// (by the admissions' clock, which tests inject).
		now := l.now
		if err := l.exec(ctx, tx, qPruneMinutes, now/60-DailyMinutes-1, 4096); err != nil {
			return err
		}
		if err := l.exec(ctx, tx, qPruneWindows, now, 4096); err != nil {
			return err
		}
		l.cache.pruneWindows(now)
	}
	if err := l.exec(ctx, tx, qJournalClear); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, e := range l.newHolds {
		e.stored = true
	}
	clear(l.newHolds)
	clear(l.gone)
	clear(l.dirtyMin)
	clear(l.dirtyWin)
	l.rows, l.bytes = 0, 0
	// What lazy commits left pending is in the tables now.
	l.pending = l.pending[:0]
	return nil
}

// rollback takes back the transaction's changes to memory, newest first.
func (t *sqlTx) rollback() {
	if t.done {
		return
	}
	t.done = true
	l := t.l
	for i := len(l.undo) - 1; i >= 0; i-- {
		u := &l.undo[i]
		switch u.kind {
		case jUsage:
			if u.had {
				*l.cache.minutes[u.tenant][u.minute] = u.old
			} else {
				delete(l.cache.minutes[u.tenant], u.minute)
			}
		case jSpend:
			if u.had {
				*l.cache.windows[u.wk] = u.old
			} else {
				delete(l.cache.windows, u.wk)
			}
		case jHold:
			l.drop(u.item)
		case jEnd:
			l.holds[u.item.r.ID] = u.item
			heap.Push(&l.expiry, u.item)
			if u.item.stored {
				delete(l.gone, u.item.r.ID)
			} else {
				l.newHolds[u.item.r.ID] = u.item
			}
		default:
			if l.ids.until[u.id] == u.until {
				delete(l.ids.until, u.id)
			}
		}
	}
	l.undo, l.buf = l.undo[:0], l.buf[:0]
}

// drop removes a live hold from memory (not from the file).
func (l *sqlLedger) drop(e *expiryItem) {
	delete(l.holds, e.r.ID)
	delete(l.newHolds, e.r.ID)
	heap.Remove(&l.expiry, e.i)
}

// end ends a live hold: in memory now, in the file at commit (the journal)
// and at the next checkpoint (the table).
func (l *sqlLedger) end(e *expiryItem) {
	l.drop(e)
	if e.stored {
		l.gone[e.r.ID] = struct{}{}
	}
	l.undo = append(l.undo, undoEntry{kind: jEnd, item: e})
	l.buf = appendEnd(l.buf, e.r.ID)
}

func (t *sqlTx) reclaim(now int64, n int) error {
	l := t.l
	l.now = max(l.now, now)
	for i := 0; i < n && len(l.expiry) > 0 && l.expiry[0].r.Expires <= now; i++ {
		l.end(l.expiry[0])
	}
	return nil
}

func (t *sqlTx) retained() int { return len(t.l.holds) }

// load reads a tenant's minutes after from into the cache, once.
func (t *sqlTx) load(tenant string, from int64) error {
	l := t.l
	if l.loaded[tenant] {
		return nil
	}
	st, err := l.stmt(qMinutes)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(t.ctx, tenant, from)
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
	err = t.l.scanRow(t.ctx, qWindow, []any{tenant, secs, start}, &reserved, &settled)
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
	l := t.l
	if _, ok := l.holds[r.ID]; ok {
		return fmt.Errorf("store: attempt %q already has a live hold", r.ID)
	}
	e := &expiryItem{r: r}
	l.holds[r.ID] = e
	l.newHolds[r.ID] = e
	heap.Push(&l.expiry, e)
	l.undo = append(l.undo, undoEntry{kind: jHold, item: e})
	l.buf = appendHold(l.buf, r)
	return nil
}

func (t *sqlTx) addUsage(tenant string, minute, reqs, toks, floor int64) error {
	if minute <= floor {
		return nil
	}
	if err := t.load(tenant, floor); err != nil {
		return err
	}
	l := t.l
	u := undoEntry{kind: jUsage, tenant: tenant, minute: minute}
	if c := l.cache.minutes[tenant][minute]; c != nil {
		u.had, u.old = true, *c
	}
	_ = l.cache.addUsage(tenant, minute, reqs, toks, floor)
	c := l.cache.minutes[tenant][minute]
	l.undo = append(l.undo, u)
	l.buf = appendUsage(l.buf, tenant, minute, c[0], c[1])
	l.dirtyMin[minuteKey{tenant, minute}] = struct{}{}
	return nil
}

func (t *sqlTx) addSpend(tenant string, secs, start, reserved, settled int64) error {
	if _, _, err := t.window(tenant, secs, start); err != nil {
		return err
	}
	l := t.l
	k := windowKey{tenant, secs, start}
	u := undoEntry{kind: jSpend, wk: k}
	if w := l.cache.windows[k]; w != nil {
		u.had, u.old = true, *w
	}
	_ = l.cache.addSpend(tenant, secs, start, reserved, settled)
	w := l.cache.windows[k]
	l.undo = append(l.undo, u)
	l.buf = appendSpend(l.buf, k, w[0], w[1])
	l.dirtyWin[k] = struct{}{}
	return nil
}

// live reports (and with end, ends) id's live hold.
func (t *sqlTx) live(id string, end bool) (bool, error) {
	e, ok := t.l.holds[id]
	if ok && end {
		t.l.end(e)
	}
	return ok, nil
}

// guard reports whether id is remembered; with add it is remembered.
func (t *sqlTx) guard(id string, now int64, add bool) (bool, error) {
	l := t.l
	if l.ids.seen(id, now, add) {
		return true, nil
	}
	if add {
		l.undo = append(l.undo, undoEntry{id: id, until: l.ids.until[id]})
	}
	return false, nil
}
