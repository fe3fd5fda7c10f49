package usagelog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // pure-Go driver "sqlite": no cgo in CI

	"switchboard/internal/tags"
)

// tagsJSON is a row's tags as stored: a JSON object (keys sorted), or
// NULL without tags.
func tagsJSON(m map[string]string) any {
	if len(m) == 0 {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return string(b)
}

// tagPath is the JSON path of a tag key ($."key").
func tagPath(k string) string { return `$."` + k + `"` }

// DefaultFile is the usage log's file name under STATE_DIR.
const DefaultFile = "usage.db"

const schema = `
CREATE TABLE IF NOT EXISTS usage_log (
	id                INTEGER PRIMARY KEY,
	ts_ms             INTEGER NOT NULL,
	request_id        TEXT NOT NULL,
	tenant            TEXT NOT NULL,
	key_id            TEXT NOT NULL,
	model             TEXT NOT NULL,
	provider          TEXT NOT NULL,
	provider_model    TEXT NOT NULL,
	endpoint          TEXT NOT NULL,
	status            INTEGER NOT NULL,
	attempts          INTEGER NOT NULL,
	prompt_tokens     INTEGER NOT NULL,
	completion_tokens INTEGER NOT NULL,
	cost_nano         INTEGER NOT NULL,
	held_nano         INTEGER NOT NULL,
	ttft_ms           INTEGER,
	duration_ms       INTEGER NOT NULL,
	stream            INTEGER NOT NULL,
	unpriced          INTEGER NOT NULL DEFAULT 0,
	served_model      TEXT NOT NULL DEFAULT '',
	tags              TEXT,
	cache_hit         INTEGER NOT NULL DEFAULT 0,
	saved_nano        INTEGER NOT NULL DEFAULT 0
);
-- The one index: every query selects a time range. Each index costs the
-- writer about 1.5 µs per row.
CREATE INDEX IF NOT EXISTS usage_log_ts ON usage_log(ts_ms);
CREATE TABLE IF NOT EXISTS usage_meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
`

// busyWait bounds a statement's wait for another connection's write lock
// (the CLI reading while the gateway writes).
const busyWait = 5 * time.Second

// dsn: WAL (readers never block the writer, and another process — the
// CLI — may read while the gateway writes), NORMAL sync (a committed
// batch survives the process being killed), a busy timeout, and write
// transactions that take the lock at BEGIN.
func dsn(path string, readOnly bool) string {
	d := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(" + strconv.FormatInt(busyWait.Milliseconds(), 10) + ")" +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	if readOnly {
		d += "&_pragma=query_only(1)"
	}
	return d
}

// DB is a usage log file.
type DB struct {
	db   *sql.DB
	path string
	// from is what queries read: the table, or (a read-only older file)
	// the table with the columns it lacks at their default.
	from string
}

// Open opens (creating it and its directory) the usage log at path.
func Open(path string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("usage log: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("usage log: open %s: %w", path, err)
	}
	// One writer (the Log) and a few readers (queries).
	db.SetMaxOpenConns(4)
	if _, err := db.ExecContext(context.Background(), schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("usage log: init %s: %w", path, err)
	}
	if err := addColumns(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("usage log: upgrade %s: %w", path, err)
	}
	return &DB{db: db, path: path, from: "usage_log"}, nil
}

// addedColumns came after the first version of the table: a file written
// by that version gets them (with their default) when opened, and a
// read-only reader (the CLI on a file no newer gateway opened yet) sees
// their default in their place. An old row's served_model stays ""
// (unknown): it is not guessed from model, since a fallback may have
// served it, and a backfill would rewrite the whole file at startup.
var addedColumns = []struct{ name, decl, zero string }{
	{"unpriced", "INTEGER NOT NULL DEFAULT 0", "0"},
	{"served_model", "TEXT NOT NULL DEFAULT ''", "''"},
	// tags: a JSON object with sorted keys, NULL without tags
	// (json_extract of NULL is NULL: no row matches a tag filter).
	{"tags", "TEXT", "NULL"},
	{"cache_hit", "INTEGER NOT NULL DEFAULT 0", "0"},
	{"saved_nano", "INTEGER NOT NULL DEFAULT 0", "0"},
}

// missingColumns lists the addedColumns the file's table lacks.
func missingColumns(db *sql.DB) ([]int, error) {
	rows, err := db.QueryContext(context.Background(), `SELECT name FROM pragma_table_info('usage_log')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		have[n] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []int
	for i, c := range addedColumns {
		if !have[c.name] {
			out = append(out, i)
		}
	}
	return out, nil
}

func addColumns(db *sql.DB) error {
	missing, err := missingColumns(db)
	if err != nil {
		return err
	}
	for _, i := range missing {
		c := addedColumns[i]
		if _, err := db.ExecContext(context.Background(), "ALTER TABLE usage_log ADD COLUMN "+c.name+" "+c.decl); err != nil {
			return err
		}
	}
	return nil
}

// OpenReadOnly opens an existing usage log for queries only (the CLI).
func OpenReadOnly(path string) (*DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("usage log: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("usage log: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(2)
	var n int
	if err := db.QueryRowContext(context.Background(),
		`SELECT COUNT(*) FROM sqlite_master WHERE name = 'usage_log'`).Scan(&n); err != nil || n == 0 {
		db.Close()
		if err == nil {
			err = errors.New("no usage_log table: not a usage log file")
		}
		return nil, fmt.Errorf("usage log: %s: %w", path, err)
	}
	missing, err := missingColumns(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("usage log: %s: %w", path, err)
	}
	d := &DB{db: db, path: path, from: "usage_log"}
	if len(missing) > 0 {
		// An older file, not upgraded (a query-only reader may not):
		// its rows read with the newer columns' defaults.
		cols := []string{"*"}
		for _, i := range missing {
			cols = append(cols, addedColumns[i].zero+" AS "+addedColumns[i].name)
		}
		d.from = "(SELECT " + strings.Join(cols, ", ") + " FROM usage_log)"
	}
	return d, nil
}

// Close closes the file.
func (d *DB) Close() error { return d.db.Close() }

// Path is the file's path.
func (d *DB) Path() string { return d.path }

const insertHead = `INSERT INTO usage_log (ts_ms, request_id, tenant, key_id, model, provider, provider_model,
	endpoint, status, attempts, prompt_tokens, completion_tokens, cost_nano, held_nano, ttft_ms, duration_ms, stream, unpriced,
	served_model, tags, cache_hit, saved_nano) VALUES `

// insertChunk rows go in one statement: one execution per row cost the
// driver about 20 allocations and a context watcher each; 32 rows of 22
// values stay far under SQLite's 32,766 variables.
const (
	insertChunk  = 32
	insertValues = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	insertArgs   = 22
)

// insertSQL is the statement for n rows.
func insertSQL(n int) string {
	var b strings.Builder
	b.Grow(len(insertHead) + n*(len(insertValues)+2))
	b.WriteString(insertHead)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(insertValues)
	}
	return b.String()
}

var insertFull = insertSQL(insertChunk)

// insert writes rows in one transaction; meta (may be nil) is written in
// the same one (a fleet drain's position, so that a crash never skips or
// doubles rows).
func (d *DB) insert(ctx context.Context, rows []Row, meta map[string]string) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	args := make([]any, 0, min(len(rows), insertChunk)*insertArgs)
	// With more CPUs the requests run on another; the pause is for one.
	pause := runtime.GOMAXPROCS(0) == 1
	var full *sql.Stmt
	for len(rows) > 0 {
		n := min(len(rows), insertChunk)
		args = args[:0]
		for i := range rows[:n] {
			r := &rows[i]
			var ttft any
			if r.TTFTMs != nil {
				ttft = *r.TTFTMs
			}
			args = append(args, r.Time.UnixMilli(), r.RequestID, r.Tenant, r.KeyID, r.Model, r.Provider,
				r.ProviderModel, r.Endpoint, r.Status, r.Attempts, r.PromptTokens, r.CompletionTokens, r.CostNano,
				r.HeldNano, ttft, r.DurationMs, r.Stream, r.Unpriced, r.ServedModel, tagsJSON(r.Tags), r.CacheHit, r.SavedNano)
		}
		if n == insertChunk {
			if full == nil {
				if full, err = tx.PrepareContext(ctx, insertFull); err != nil {
					return err
				}
				defer full.Close()
			}
			_, err = full.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, insertSQL(n), args...)
		}
		if err != nil {
			return err
		}
		rows = rows[n:]
		if pause && len(rows) > 0 {
			time.Sleep(chunkPause)
		}
	}
	for k, v := range meta {
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage_meta (k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v`, k, v); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// chunkPause parks the writer between the statements of a batch. On one
// CPU (GOMAXPROCS 1, as on a one-core deployment) the writer would hold
// it for a whole batch, about 7 µs a row (2 ms for the 300 rows of 100 ms
// at 3,000 requests/s), and a request arriving meanwhile would wait for
// all of it: that was most of the gateway's added p99 at concurrency 1.
// Parked, the writer lets the scheduler poll the network and run the
// requests that are ready, so one waits for at most one statement
// (insertChunk rows, about 0.2 ms). runtime.Gosched would not do: it
// queues the writer again before the network is polled. The pause is
// longer than a scheduling round, so that the writer's timer has not
// fired by the time the scheduler looks (an idle scheduler sleeps in
// whole milliseconds, so a batch of 300 rows commits up to 10 ms later,
// which nobody waits for). Measured on one CPU with a goroutine waking
// every 100 µs beside 300-row batches: its worst delay 3.7 to 17 ms
// without the pause, 1.9 to 4.5 with it (the rest is the timer's own
// millisecond and the machine's other work).
const chunkPause = 50 * time.Microsecond

// Insert writes rows in one transaction.
func (d *DB) Insert(ctx context.Context, rows ...Row) error { return d.insert(ctx, rows, nil) }

// meta reads a usage_meta value ("" when unset).
func (d *DB) meta(ctx context.Context, k string) (string, error) {
	var v string
	err := d.db.QueryRowContext(ctx, `SELECT v FROM usage_meta WHERE k = ?`, k).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// Prune deletes at most batch rows older than before; it returns how many
// it deleted (call again while it returns batch). Batches keep each write
// transaction short, so the writer and readers are never held long.
func (d *DB) Prune(ctx context.Context, before time.Time, batch int) (int, error) {
	res, err := d.db.ExecContext(ctx, `DELETE FROM usage_log WHERE id IN
		(SELECT id FROM usage_log WHERE ts_ms < ? ORDER BY ts_ms LIMIT ?)`, before.UnixMilli(), batch)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// where renders f as a WHERE clause and its arguments.
func (f *Filter) where() (string, []any) {
	var conds []string
	var args []any
	add := func(c string, v any) { conds = append(conds, c); args = append(args, v) }
	if !f.From.IsZero() {
		add("ts_ms >= ?", f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		add("ts_ms < ?", f.To.UnixMilli())
	}
	if f.Tenant != "" {
		add("tenant = ?", f.Tenant)
	}
	if f.KeyID != "" {
		add("key_id = ?", f.KeyID)
	}
	if f.Model != "" {
		add("model = ?", f.Model)
	}
	if f.Provider != "" {
		add("provider = ?", f.Provider)
	}
	if f.ServedModel != "" {
		add("served_model = ?", f.ServedModel)
	}
	for _, t := range f.Tags {
		conds = append(conds, "json_extract(tags, ?) = ?")
		args = append(args, tagPath(t.Key), t.Value)
	}
	switch {
	case f.Status != 0:
		add("status = ?", f.Status)
	case f.StatusClass != 0:
		conds = append(conds, "status >= ? AND status < ?")
		args = append(args, f.StatusClass*100, f.StatusClass*100+100)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// dimensionExpr is each dimension's SQL expression (fixed strings only:
// never the client's text).
var dimensionExpr = map[string]string{
	"tenant":       "tenant",
	"key":          "key_id",
	"model":        "model",
	"served_model": "served_model",
	"provider":     "provider",
	"status":       "CAST(status AS TEXT)",
	"day":          "strftime('%Y-%m-%d', ts_ms / 1000, 'unixepoch')",
	"hour":         "strftime('%Y-%m-%dT%H', ts_ms / 1000, 'unixepoch')",
}

// MaxGroups bounds a summary's groups.
const MaxGroups = 10_000

// Summarize sums the rows f selects, grouped by dims (each one of
// Dimensions; none: one total), largest cost first, at most MaxGroups.
func (d *DB) Summarize(ctx context.Context, f Filter, dims []string) ([]Group, error) {
	var sel, by []string
	for _, dim := range dims {
		e, ok := dimensionExpr[dim]
		if k, tag := strings.CutPrefix(dim, TagDimension); tag && tags.ValidKey(k) {
			// A valid key is letters, digits, '_', '.' and '-' only: safe
			// inside the quoted path.
			e, ok = "json_extract(tags, '"+tagPath(k)+"')", true
		}
		if !ok {
			return nil, fmt.Errorf("unknown dimension %q", dim)
		}
		sel = append(sel, e)
		by = append(by, e)
	}
	where, args := f.where()
	q := "SELECT " + strings.Join(append(sel, "COUNT(*)", "COALESCE(SUM(prompt_tokens),0)", "COALESCE(SUM(completion_tokens),0)",
		"COALESCE(SUM(cost_nano),0)", "COALESCE(SUM(held_nano),0)", "COALESCE(SUM(unpriced),0)", "COALESCE(SUM(cache_hit),0)",
		"COALESCE(SUM(saved_nano),0)"), ", ") + " FROM " + d.from + where
	if len(by) > 0 {
		q += " GROUP BY " + strings.Join(by, ", ") + " ORDER BY " + strconv.Itoa(len(by)+4) + " DESC, 1"
	}
	q += " LIMIT " + strconv.Itoa(MaxGroups)
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Group
	for rows.Next() {
		keys := make([]sql.NullString, len(dims))
		g := Group{Keys: make(map[string]string, len(dims))}
		dest := make([]any, 0, len(dims)+8)
		for i := range keys {
			dest = append(dest, &keys[i])
		}
		dest = append(dest, &g.Requests, &g.PromptTokens, &g.CompletionTokens, &g.CostNano, &g.HeldNano, &g.Unpriced, &g.CacheHits,
			&g.SavedNano)
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		for i, dim := range dims {
			g.Keys[dim] = keys[i].String
		}
		if len(dims) == 0 && g.Requests == 0 {
			continue
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

const selectRow = `SELECT id, ts_ms, request_id, tenant, key_id, model, provider, provider_model, endpoint, status,
	attempts, prompt_tokens, completion_tokens, cost_nano, held_nano, ttft_ms, duration_ms, stream, unpriced, served_model, tags,
	cache_hit, saved_nano
	FROM `

// MaxPage bounds a page of rows.
const MaxPage = 1000

// List returns up to limit rows f selects, newest first, starting after
// the cursor (a row id; 0: from the newest), and the cursor of the next
// page (0 when this is the last).
func (d *DB) List(ctx context.Context, f Filter, cursor int64, limit int) ([]Row, int64, error) {
	limit = min(max(limit, 1), MaxPage)
	var out []Row
	err := d.each(ctx, f, cursor, limit+1, func(r Row) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	var next int64
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}

// Each calls fn for up to limit rows f selects, newest first, as they are
// read (exports stream them); an error from fn stops it.
func (d *DB) Each(ctx context.Context, f Filter, limit int, fn func(Row) error) error {
	return d.each(ctx, f, 0, limit, fn)
}

// EachFrom is Each starting after cursor (a row id; 0: the newest).
func (d *DB) EachFrom(ctx context.Context, f Filter, cursor int64, limit int, fn func(Row) error) error {
	return d.each(ctx, f, cursor, limit, fn)
}

func (d *DB) each(ctx context.Context, f Filter, cursor int64, limit int, fn func(Row) error) error {
	where, args := f.where()
	if cursor > 0 {
		if where == "" {
			where = " WHERE id < ?"
		} else {
			where += " AND id < ?"
		}
		args = append(args, cursor)
	}
	rows, err := d.db.QueryContext(ctx, selectRow+d.from+where+" ORDER BY id DESC LIMIT ?", append(args, limit)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r Row
		var ts int64
		var ttft sql.NullInt64
		var tg sql.NullString
		if err := rows.Scan(&r.ID, &ts, &r.RequestID, &r.Tenant, &r.KeyID, &r.Model, &r.Provider, &r.ProviderModel,
			&r.Endpoint, &r.Status, &r.Attempts, &r.PromptTokens, &r.CompletionTokens, &r.CostNano, &r.HeldNano,
			&ttft, &r.DurationMs, &r.Stream, &r.Unpriced, &r.ServedModel, &tg, &r.CacheHit, &r.SavedNano); err != nil {
			return err
		}
		if tg.Valid && tg.String != "" {
			_ = json.Unmarshal([]byte(tg.String), &r.Tags) // written by insert: a JSON object
		}
		r.Time = time.UnixMilli(ts).UTC()
		if ttft.Valid {
			v := ttft.Int64
			r.TTFTMs = &v
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Count is the number of rows (tests, the dashboard).
func (d *DB) Count(ctx context.Context) (int64, error) {
	var n int64
	err := d.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+d.from).Scan(&n)
	return n, err
}
