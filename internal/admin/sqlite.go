package admin

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	_ "modernc.org/sqlite" // the in-memory database of OpenMemory
)

// AuditMax bounds the audit rows kept: older rows are dropped as new ones
// are written (a row is a few hundred bytes; 1,000,000 is a few hundred MB
// at most, and years of admin changes).
const AuditMax = 1_000_000

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS admin_keys (id TEXT PRIMARY KEY, rec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS admin_tenants (name TEXT PRIMARY KEY, rec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS admin_audit (seq INTEGER PRIMARY KEY, rec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS admin_version (one INTEGER PRIMARY KEY CHECK (one = 1), v INTEGER NOT NULL);
INSERT OR IGNORE INTO admin_version (one, v) VALUES (1, 0);`

// SQLite keeps the records in tables of a SQLite database: the store's
// file (its connection runs transactions as BEGIN IMMEDIATE), or an
// in-memory one. Only this process writes it.
type SQLite struct {
	db   *sql.DB
	memo memo
}

// NewSQLite creates the tables if needed.
func NewSQLite(db *sql.DB) (*SQLite, error) {
	if _, err := db.ExecContext(context.Background(), sqliteSchema); err != nil {
		return nil, fmt.Errorf("admin tables: %w", err)
	}
	return &SQLite{db: db}, nil
}

// OpenMemory is a SQLite store in memory, for a gateway that keeps no
// state file (store.backend: memory): issued keys last until it stops.
func OpenMemory() (*SQLite, error) {
	db, err := sql.Open("sqlite", "file::memory:?_txlock=immediate")
	if err != nil {
		return nil, err
	}
	// One connection holds the database: it lives as long as that one.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	return NewSQLite(db)
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func loadSQL(ctx context.Context, q querier) (*State, error) {
	st := newState()
	if err := q.QueryRowContext(ctx, `SELECT v FROM admin_version WHERE one = 1`).Scan(&st.Version); err != nil {
		return nil, err
	}
	if err := scanRecs(ctx, q, `SELECT rec FROM admin_keys`, func(b []byte) error {
		k := &Key{}
		if err := json.Unmarshal(b, k); err != nil {
			return err
		}
		st.Keys[k.ID] = k
		return nil
	}); err != nil {
		return nil, err
	}
	if err := scanRecs(ctx, q, `SELECT rec FROM admin_tenants`, func(b []byte) error {
		t := &Tenant{}
		if err := json.Unmarshal(b, t); err != nil {
			return err
		}
		st.Tenants[t.Name] = t
		return nil
	}); err != nil {
		return nil, err
	}
	return st, nil
}

func scanRecs(ctx context.Context, q querier, query string, each func([]byte) error, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return err
		}
		if err := each(b); err != nil {
			return fmt.Errorf("admin record: %w", err)
		}
	}
	return rows.Err()
}

func (s *SQLite) Load(ctx context.Context) (*State, error) { return s.load(ctx, s.db) }

// load reads the version, then every record unless the memo holds that
// version.
func (s *SQLite) load(ctx context.Context, q querier) (*State, error) {
	var v int64
	if err := q.QueryRowContext(ctx, `SELECT v FROM admin_version WHERE one = 1`).Scan(&v); err != nil {
		return nil, err
	}
	if st := s.memo.at(v, ""); st != nil {
		return st, nil
	}
	st, err := loadSQL(ctx, q)
	if err == nil {
		s.memo.keep(st, "")
	}
	return st, err
}

func (s *SQLite) Version(ctx context.Context) (int64, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, `SELECT v FROM admin_version WHERE one = 1`).Scan(&v)
	return v, err
}

// Update is one transaction: read, decide, write records, audit row and
// version, commit. A crash before the commit leaves none of it.
func (s *SQLite) Update(ctx context.Context, fn func(*State) (*Change, error)) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	st, err := s.load(ctx, tx)
	if err != nil {
		return 0, err
	}
	ch, err := fn(st)
	if err != nil {
		return 0, err
	}
	v := st.Version + 1
	for _, k := range ch.PutKeys {
		b, _ := json.Marshal(k)
		if _, err := tx.ExecContext(ctx, `INSERT INTO admin_keys (id, rec) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET rec = excluded.rec`, k.ID, b); err != nil {
			return 0, err
		}
	}
	for _, t := range ch.PutTenants {
		b, _ := json.Marshal(t)
		if _, err := tx.ExecContext(ctx, `INSERT INTO admin_tenants (name, rec) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET rec = excluded.rec`, t.Name, b); err != nil {
			return 0, err
		}
	}
	for _, name := range ch.DelTenants {
		if _, err := tx.ExecContext(ctx, `DELETE FROM admin_tenants WHERE name = ?`, name); err != nil {
			return 0, err
		}
	}
	a := ch.Audit
	a.Seq = v
	b, _ := json.Marshal(a)
	if _, err := tx.ExecContext(ctx, `INSERT INTO admin_audit (seq, rec) VALUES (?, ?)`, v, b); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM admin_audit WHERE seq <= ?`, v-AuditMax); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE admin_version SET v = ? WHERE one = 1`, v); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	s.memo.keep(st.after(ch, v), "")
	return v, nil
}

func (s *SQLite) Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	out := []AuditEntry{}
	err := scanRecs(ctx, s.db, `SELECT rec FROM admin_audit WHERE seq > ? ORDER BY seq LIMIT ?`,
		func(b []byte) error {
			var e AuditEntry
			if err := json.Unmarshal(b, &e); err != nil {
				return err
			}
			out = append(out, e)
			return nil
		}, q.After, q.Limit)
	return out, err
}

// Changes is nil: only this process writes the file.
func (s *SQLite) Changes(context.Context) <-chan struct{} { return nil }
