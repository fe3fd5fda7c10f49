package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"
)

// SQLite keeps answers in its own table of the store's file. The process
// owns the file (exclusive lock), so the count and byte totals are read
// once and then kept here.
type SQLite struct {
	db  *sql.DB
	lim Limits
	now func() time.Time

	mu           sync.Mutex // serializes claims: check-then-insert is one step
	count, total int64
}

const sqliteSchema = `CREATE TABLE IF NOT EXISTS idempotency (
	k TEXT PRIMARY KEY,
	hash TEXT NOT NULL,
	token TEXT NOT NULL,
	rec BLOB,
	size INTEGER NOT NULL DEFAULT 0,
	expires_ms INTEGER NOT NULL
)`

// NewSQLite creates the table if needed.
func NewSQLite(db *sql.DB, lim Limits, now func() time.Time) (*SQLite, error) {
	if now == nil {
		now = time.Now
	}
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		return nil, err
	}
	// The process owns the file (exclusive lock): a claim still pending
	// at open belonged to a process that died with its request in flight.
	// Nobody will finish it; a retry must run at once.
	if _, err := db.ExecContext(ctx, `DELETE FROM idempotency WHERE rec IS NULL`); err != nil {
		return nil, err
	}
	s := &SQLite{db: db, lim: lim, now: now}
	var total sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), SUM(size) FROM idempotency`).Scan(&s.count, &total); err != nil {
		return nil, err
	}
	s.total = total.Int64
	return s, nil
}

func (s *SQLite) Claim(ctx context.Context, k Key, hash string, lease time.Duration) (State, *Record, string, error) {
	key := k.Scope
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixMilli()
	var h, tok string
	var rec []byte
	var size, exp int64
	err := s.db.QueryRowContext(ctx, `SELECT hash, token, rec, size, expires_ms FROM idempotency WHERE k = ?`, key).
		Scan(&h, &tok, &rec, &size, &exp)
	switch {
	case err == nil && exp > now:
		switch {
		case h != hash:
			return Conflict, nil, "", nil
		case rec == nil:
			return Pending, nil, "", nil
		}
		r, err := Decode(rec)
		return Replay, r, "", err
	case err == nil:
		if _, err := s.db.ExecContext(ctx, `DELETE FROM idempotency WHERE k = ?`, key); err != nil {
			return 0, nil, "", err
		}
		s.count--
		s.total -= size
	case !errors.Is(err, sql.ErrNoRows):
		return 0, nil, "", err
	}
	tok = newToken()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO idempotency (k, hash, token, expires_ms) VALUES (?, ?, ?, ?)`,
		key, hash, tok, now+lease.Milliseconds()); err != nil {
		return 0, nil, "", err
	}
	s.count++
	return Fresh, nil, tok, nil
}

func (s *SQLite) Finish(ctx context.Context, k Key, token string, rec *Record) (bool, error) {
	key, b := k.Scope, rec.Encode()
	if int64(len(b)) > s.lim.MaxBytes {
		return false, errors.Join(ErrTooLarge, s.Release(ctx, k, token))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixMilli()
	if s.lim.full(s.count, s.total, int64(len(b))) {
		s.reclaim(ctx, now)
	}
	if s.lim.full(s.count, s.total, int64(len(b))) {
		return false, s.release(ctx, key, token)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE idempotency SET rec = ?, size = ?, expires_ms = ? WHERE k = ? AND token = ? AND rec IS NULL`,
		b, len(b), now+s.lim.TTL.Milliseconds(), key, token)
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		s.total += int64(len(b))
		return true, nil
	}
	return false, nil
}

// reclaim deletes expired rows in one fixed-size batch; the totals drop by
// the sizes the delete itself returns (one statement, not a count first).
func (s *SQLite) reclaim(ctx context.Context, now int64) {
	rows, err := s.db.QueryContext(ctx, `DELETE FROM idempotency WHERE k IN
		(SELECT k FROM idempotency WHERE expires_ms <= ? LIMIT 1000) RETURNING size`, now)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var size int64
		if rows.Scan(&size) == nil {
			s.count--
			s.total -= size
		}
	}
}

func (s *SQLite) Renew(ctx context.Context, k Key, token string, lease time.Duration) (bool, error) {
	now := s.now().UnixMilli()
	res, err := s.db.ExecContext(ctx, `UPDATE idempotency SET expires_ms = ? WHERE k = ? AND token = ? AND rec IS NULL AND expires_ms > ?`,
		now+lease.Milliseconds(), k.Scope, token, now)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

func (s *SQLite) Release(ctx context.Context, k Key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.release(ctx, k.Scope, token)
}

func (s *SQLite) release(ctx context.Context, key, token string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM idempotency WHERE k = ? AND token = ? AND rec IS NULL`, key, token)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		s.count--
	}
	return nil
}
