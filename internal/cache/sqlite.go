package cache

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // pure-Go driver "sqlite"
)

// DefaultFile is the SQLite cache's file name under STATE_DIR: a file of
// its own, not the store's (whose one connection is the spend ledger's),
// so that cache writes never queue behind admissions.
const DefaultFile = "cache.db"

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS cache_entries (
	k          TEXT PRIMARY KEY,
	part       TEXT NOT NULL,
	size       INTEGER NOT NULL,
	expires_ms INTEGER NOT NULL,
	used_ms    INTEGER NOT NULL,
	v          BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS cache_lru ON cache_entries(part, used_ms);
CREATE INDEX IF NOT EXISTS cache_expiry ON cache_entries(expires_ms);
-- Bytes per partition, kept in the same transactions as the entries, so
-- that every process sharing the file agrees on them.
CREATE TABLE IF NOT EXISTS cache_parts (part TEXT PRIMARY KEY, bytes INTEGER NOT NULL);
`

// rowOverhead is counted per row beyond its value and key (row header,
// two index entries).
const rowOverhead = 64

// touchEvery coarsens the LRU clock: a hit rewrites an entry's last use
// at most this often, so that reads stay reads.
const touchEvery = time.Minute

// SQLite keeps entries in their own file: WAL (readers never wait for the
// writer), NORMAL sync, a busy timeout, write transactions that lock at
// BEGIN. Several processes may share the file. Reads never write: a hit's
// new last use is queued and written in batches by one goroutine.
type SQLite struct {
	db      *sql.DB
	now     func() time.Time
	touches chan string
	stop    chan struct{}
	done    sync.WaitGroup
	// write serialises this process's writers (a token): they would
	// otherwise meet in SQLite's busy handler, which polls with sleeps.
	// Waiting for it honours the caller's deadline.
	write chan struct{}
}

// lock takes the write token, or gives up with ctx.
func (s *SQLite) lock(ctx context.Context) error {
	select {
	case s.write <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *SQLite) unlock() { <-s.write }

// sqliteDSN: see SQLite. The busy timeout is short: a cache call has its
// own deadline, and a miss is better than a wait.
func sqliteDSN(path string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(1000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

// OpenSQLite opens (creating it and its directory) the cache file at path;
// now is its clock (nil: time.Now).
func OpenSQLite(path string, now func() time.Time) (*SQLite, error) {
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		return nil, fmt.Errorf("cache: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	if _, err := db.ExecContext(context.Background(), sqliteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("cache: init %s: %w", path, err)
	}
	s := &SQLite{db: db, now: now, touches: make(chan string, 1024), stop: make(chan struct{}),
		write: make(chan struct{}, 1)}
	s.done.Add(1)
	go s.toucher()
	return s, nil
}

// Get implements Store.
func (s *SQLite) Get(ctx context.Context, key, _ string) (*Entry, error) {
	var v []byte
	var exp, used int64
	err := s.db.QueryRowContext(ctx, `SELECT v, expires_ms, used_ms FROM cache_entries WHERE k = ?`, key).Scan(&v, &exp, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	now := s.now().UnixMilli()
	if exp <= now {
		return nil, nil // deleted by a later Put's reclaim
	}
	if now-used >= touchEvery.Milliseconds() {
		select {
		case s.touches <- key:
		default: // the writer is behind: this use goes unrecorded
		}
	}
	return Decode(v)
}

// toucher writes queued last uses, in batches of what has arrived.
func (s *SQLite) toucher() {
	defer s.done.Done()
	for {
		var keys []string
		select {
		case <-s.stop:
			return
		case k := <-s.touches:
			keys = append(keys, k)
		}
	more:
		for len(keys) < 256 {
			select {
			case k := <-s.touches:
				keys = append(keys, k)
			default:
				break more
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.touch(ctx, keys)
		cancel()
	}
}

func (s *SQLite) touch(ctx context.Context, keys []string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := s.now().UnixMilli()
	for _, k := range keys {
		if _, err := tx.ExecContext(ctx, `UPDATE cache_entries SET used_ms = ? WHERE k = ?`, now, k); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Put implements Store: in one transaction, it reclaims a batch of expired
// rows, replaces key, and evicts the partition's least recently used rows
// until the new one fits its budget.
func (s *SQLite) Put(ctx context.Context, key string, e *Entry, b Bounds) (bool, error) {
	v := e.Encode()
	size := int64(len(v)+len(key)) + rowOverhead
	if size > b.MaxBytes {
		return false, nil
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	now := s.now().UnixMilli()
	freed := map[string]int64{}
	del := func(q string, args ...any) (int, error) {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var part string
			var sz int64
			if err := rows.Scan(&part, &sz); err != nil {
				return n, err
			}
			freed[part] += sz
			n++
		}
		return n, rows.Err()
	}
	if _, err := del(`DELETE FROM cache_entries WHERE k IN (SELECT k FROM cache_entries WHERE expires_ms <= ? LIMIT 100)
		RETURNING part, size`, now); err != nil {
		return false, err
	}
	if _, err := del(`DELETE FROM cache_entries WHERE k = ? RETURNING part, size`, key); err != nil {
		return false, err
	}
	if err := applyFreed(ctx, tx, freed); err != nil {
		return false, err
	}
	var used int64
	err = tx.QueryRowContext(ctx, `SELECT bytes FROM cache_parts WHERE part = ?`, b.Partition).Scan(&used)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, err
	}
	for used+size > b.MaxBytes {
		clear(freed)
		// The least recently used row of the partition, one at a time:
		// no more is evicted than the new entry needs.
		n, err := del(`DELETE FROM cache_entries WHERE k = (SELECT k FROM cache_entries WHERE part = ? ORDER BY used_ms LIMIT 1)
			RETURNING part, size`, b.Partition)
		if err != nil {
			return false, err
		}
		if n == 0 {
			used = 0 // the accounting drifted (a crash between writes cannot: one transaction); trust the rows
			break
		}
		used -= freed[b.Partition]
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO cache_entries (k, part, size, expires_ms, used_ms, v) VALUES (?, ?, ?, ?, ?, ?)`,
		key, b.Partition, size, now+b.TTL.Milliseconds(), now, v); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO cache_parts (part, bytes) VALUES (?, ?)
		ON CONFLICT(part) DO UPDATE SET bytes = ?`, b.Partition, used+size, used+size); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// applyFreed subtracts freed bytes from their partitions.
func applyFreed(ctx context.Context, tx *sql.Tx, freed map[string]int64) error {
	for part, n := range freed {
		if _, err := tx.ExecContext(ctx, `UPDATE cache_parts SET bytes = MAX(bytes - ?, 0) WHERE part = ?`, n, part); err != nil {
			return err
		}
	}
	return nil
}

// Bytes is the sum of the partitions' bytes.
func (s *SQLite) Bytes(ctx context.Context) (int64, error) {
	var n sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT SUM(bytes) FROM cache_parts`).Scan(&n)
	return n.Int64, err
}

// Close stops the last-use writer and closes the file.
func (s *SQLite) Close() error {
	close(s.stop)
	s.done.Wait()
	return s.db.Close()
}

// Held implements Held.
func (s *SQLite) Held(ctx context.Context) (int64, error) { return s.Bytes(ctx) }
