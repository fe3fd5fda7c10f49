package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // pure-Go driver "sqlite": no cgo in CI
)

// schema is applied at open; every statement is idempotent.
const schema = `
CREATE TABLE IF NOT EXISTS attempts (
	id           TEXT PRIMARY KEY,
	tenant       TEXT NOT NULL,
	provider     TEXT NOT NULL,
	model        TEXT NOT NULL,
	created_ms   INTEGER NOT NULL,
	minute       INTEGER NOT NULL,
	est_tokens   INTEGER NOT NULL,
	input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER,
	cache_write_tokens INTEGER, reasoning_tokens INTEGER,
	budgeted     INTEGER NOT NULL,
	window_secs  INTEGER NOT NULL,
	window_start INTEGER NOT NULL,
	held_nano    INTEGER NOT NULL,
	cost_nano    INTEGER NOT NULL DEFAULT 0,
	state        TEXT NOT NULL,
	expires_s    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS attempts_expiry ON attempts(expires_s);
CREATE INDEX IF NOT EXISTS attempts_tenant ON attempts(tenant, created_ms);
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
INSERT OR IGNORE INTO meta (k, v) VALUES ('schema', '1');
`

// The ledger's statements, prepared once at open (parsing SQL dominated
// an admission).
const (
	qReclaim      = `DELETE FROM attempts WHERE id IN (SELECT id FROM attempts WHERE expires_s <= ? LIMIT ?)`
	qPruneMinutes = `DELETE FROM usage_minutes WHERE (tenant, minute) IN
		(SELECT tenant, minute FROM usage_minutes WHERE minute <= ? LIMIT ?)`
	qPruneWindows = `DELETE FROM spend_windows WHERE (tenant, window_secs, window_start) IN
		(SELECT tenant, window_secs, window_start FROM spend_windows WHERE window_start + window_secs + 172800 < ? LIMIT ?)`
	qDaily = `SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(tokens), 0), MIN(minute)
		FROM usage_minutes WHERE tenant = ? AND minute > ?`
	qWindow = `SELECT reserved_nano, settled_nano FROM spend_windows
		WHERE tenant = ? AND window_secs = ? AND window_start = ?`
	qInsert = `INSERT INTO attempts (id, tenant, provider, model, created_ms, minute, est_tokens, budgeted,
		window_secs, window_start, held_nano, state, expires_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qAddUsage = `INSERT INTO usage_minutes (tenant, minute, requests, tokens) VALUES (?, ?, ?, MAX(?, 0))
		ON CONFLICT (tenant, minute) DO UPDATE SET requests = requests + excluded.requests,
		tokens = MAX(tokens + ?, 0)`
	qAddSpend = `INSERT INTO spend_windows (tenant, window_secs, window_start, reserved_nano, settled_nano)
		VALUES (?, ?, ?, MAX(?, 0), MAX(?, 0))
		ON CONFLICT (tenant, window_secs, window_start) DO UPDATE SET
		reserved_nano = MAX(reserved_nano + ?, 0), settled_nano = MAX(settled_nano + ?, 0)`
	qUpdate = `UPDATE attempts SET state = ?, held_nano = ?, cost_nano = ?,
		input_tokens = COALESCE(?, input_tokens), output_tokens = COALESCE(?, output_tokens),
		cache_read_tokens = COALESCE(?, cache_read_tokens), cache_write_tokens = COALESCE(?, cache_write_tokens),
		reasoning_tokens = COALESCE(?, reasoning_tokens),
		expires_s = CASE WHEN ? > 0 THEN ? ELSE expires_s END
		WHERE id = ?`
)

var statements = []string{qReclaim, qPruneMinutes, qPruneWindows, qDaily, qWindow, qInsert, qAddUsage, qAddSpend, qUpdate}

// DSN is the connection string of a SQLite file: WAL journal, a busy
// timeout, NORMAL sync (durable at checkpoints, never corrupt), and write
// transactions that take the lock at BEGIN.
func DSN(path string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

// OpenSQLite opens (creating it and its directory) the SQLite store at path.
// One process should own a file: the rate buckets and the retained-record
// count live in that process.
func OpenSQLite(path string) (Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	db, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// One connection: decisions are serialized anyway, and a single writer
	// never meets SQLITE_BUSY from itself.
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: init %s: %w", path, err)
	}
	l := &sqlLedger{db: db, stmts: map[string]*sql.Stmt{}}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM attempts`).Scan(&l.count); err != nil {
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
	return newLocal(l), nil
}

type sqlLedger struct {
	db    *sql.DB
	count int // attempt records; kept in step with commits
	// stmts are prepared once: parsing SQL dominated an admission.
	stmts map[string]*sql.Stmt
	// sweeps counts reclaims; counters are pruned on every 64th.
	sweeps int
}

// stmt returns the prepared statement of q.
func (l *sqlLedger) stmt(q string) (*sql.Stmt, error) {
	if st, ok := l.stmts[q]; ok {
		return st, nil
	}
	return nil, fmt.Errorf("store: statement not prepared: %.40s", q)
}

func (l *sqlLedger) begin(ctx context.Context) (ledgerTx, error) {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &sqlTx{l: l, tx: tx, ctx: ctx}, nil
}

func (l *sqlLedger) close() error { return l.db.Close() }

type sqlTx struct {
	l     *sqlLedger
	tx    *sql.Tx
	ctx   context.Context
	delta int
	done  bool
}

func (t *sqlTx) exec(q string, args ...any) (sql.Result, error) {
	st, err := t.l.stmt(q)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(t.ctx, st).ExecContext(t.ctx, args...)
}

func (t *sqlTx) queryRow(q string, args ...any) *sql.Row {
	st, err := t.l.stmt(q)
	if err != nil {
		return t.tx.QueryRowContext(t.ctx, q, args...) // runs unprepared
	}
	return t.tx.StmtContext(t.ctx, st).QueryRowContext(t.ctx, args...)
}

func (t *sqlTx) commit() error {
	if err := t.tx.Commit(); err != nil {
		return err
	}
	t.done = true
	t.l.count += t.delta
	return nil
}

func (t *sqlTx) rollback() {
	if !t.done {
		t.done = true
		_ = t.tx.Rollback()
	}
}

func (t *sqlTx) reclaim(now int64, n int) error {
	res, err := t.exec(qReclaim, now, n)
	if err != nil {
		return err
	}
	k, _ := res.RowsAffected()
	t.delta -= int(k)
	if t.l.sweeps++; t.l.sweeps%64 != 0 {
		return nil
	}
	// Now and then, counters past any window they could count in.
	if _, err := t.exec(qPruneMinutes, now/60-DailyMinutes-1, 64*n); err != nil {
		return err
	}
	_, err = t.exec(qPruneWindows, now, 64*n)
	return err
}

func (t *sqlTx) retained() int { return t.l.count + t.delta }

func (t *sqlTx) daily(tenant string, from int64) (reqs, toks, oldest int64, err error) {
	var o sql.NullInt64
	err = t.queryRow(qDaily, tenant, from).Scan(&reqs, &toks, &o)
	return reqs, toks, o.Int64, err
}

func (t *sqlTx) window(tenant string, secs, start int64) (reserved, settled int64, err error) {
	err = t.queryRow(qWindow, tenant, secs, start).Scan(&reserved, &settled)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	return reserved, settled, err
}

func (t *sqlTx) insert(r *record) error {
	b := 0
	if r.Budgeted {
		b = 1
	}
	_, err := t.exec(qInsert,
		r.ID, r.Tenant, r.Provider, r.Model, r.Created.UnixMilli(), r.Minute, r.EstTokens, b,
		r.WindowSecs, r.WindowStart, r.Held, r.State, r.Expires)
	if err == nil {
		t.delta++
	}
	return err
}

func (t *sqlTx) addUsage(tenant string, minute, reqs, toks, floor int64) error {
	if minute <= floor {
		return nil
	}
	_, err := t.exec(qAddUsage, tenant, minute, reqs, toks, toks)
	return err
}

func (t *sqlTx) addSpend(tenant string, secs, start, reserved, settled int64) error {
	_, err := t.exec(qAddSpend,
		tenant, secs, start, reserved, settled, reserved, settled)
	return err
}

func (t *sqlTx) update(s *Settlement, expires int64) error {
	var in, out, cr, cw, rs sql.NullInt64
	if tk := s.Tokens; tk != nil {
		in, out, cr, cw, rs = nz(tk.Input), nz(tk.Output), nz(tk.CacheRead), nz(tk.CacheWrite), nz(tk.Reasoning)
	}
	_, err := t.exec(qUpdate, s.State, s.Held, s.Cost, in, out, cr, cw, rs, expires, expires, s.ID)
	return err
}

func nz(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: true} }
