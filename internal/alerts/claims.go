package alerts

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/clock"
)

// Claims decide which replica sends an event: the first to claim its key
// sends it, and nobody else until the claim expires. A fleet claims in
// Redis; one process in its SQLite file (so a restart does not send the
// same threshold again) or in memory.
type Claims interface {
	// Claim reports whether this caller took key (for ttl).
	Claim(ctx context.Context, key string, ttl time.Duration) (bool, error)
	// Release gives a claim back: its event was not delivered, and a
	// later check may send it.
	Release(ctx context.Context, key string) error
}

// claimPrefix names the claims in Redis and SQLite.
const claimPrefix = "switchboard:alerts:v1:"

// RedisClaims claims with SET NX PX: one atomic step, shared by every
// replica on the server. Each claim is one key, so in a Redis Cluster
// (any Cmdable: one server, a cluster or Sentinel) claims need no hash
// tag and spread over the slots.
type RedisClaims struct{ C redis.Cmdable }

func (r RedisClaims) Claim(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return r.C.SetNX(ctx, claimPrefix+key, "1", max(ttl, time.Second)).Result()
}

func (r RedisClaims) Release(ctx context.Context, key string) error {
	return r.C.Del(ctx, claimPrefix+key).Err()
}

// SQLiteClaims keeps claims in a table of the store's file.
type SQLiteClaims struct {
	db  *sql.DB
	clk clock.Clock
}

// NewSQLiteClaims creates the table if needed.
func NewSQLiteClaims(db *sql.DB, clk clock.Clock) (*SQLiteClaims, error) {
	_, err := db.ExecContext(context.Background(),
		`CREATE TABLE IF NOT EXISTS alert_claims (k TEXT PRIMARY KEY, expires_ms INTEGER NOT NULL)`)
	if err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &SQLiteClaims{db: db, clk: clk}, nil
}

func (s *SQLiteClaims) Claim(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	now := s.clk.Now()
	// Taken when absent or expired; an expired row is taken over in place.
	res, err := s.db.ExecContext(ctx, `INSERT INTO alert_claims (k, expires_ms) VALUES (?, ?)
		ON CONFLICT (k) DO UPDATE SET expires_ms = excluded.expires_ms WHERE alert_claims.expires_ms <= ?`,
		claimPrefix+key, now.Add(ttl).UnixMilli(), now.UnixMilli())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	if n == 1 {
		// Expired claims of other keys go now and then (a bounded delete).
		_, _ = s.db.ExecContext(ctx, `DELETE FROM alert_claims WHERE k IN (SELECT k FROM alert_claims WHERE expires_ms <= ? LIMIT 100)`, now.UnixMilli())
	}
	return n == 1, nil
}

func (s *SQLiteClaims) Release(ctx context.Context, key string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM alert_claims WHERE k = ?`, claimPrefix+key)
	return err
}

// MemoryClaims is one process's claims, lost at exit.
type MemoryClaims struct {
	Clock clock.Clock
	mu    sync.Mutex
	until map[string]time.Time
}

func (m *MemoryClaims) Claim(_ context.Context, key string, ttl time.Duration) (bool, error) {
	if m.Clock == nil {
		return false, errors.New("alerts: MemoryClaims without a clock")
	}
	now := m.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.until == nil {
		m.until = map[string]time.Time{}
	}
	if u, ok := m.until[key]; ok && now.Before(u) {
		return false, nil
	}
	for k, u := range m.until { // expired claims go; the map stays small
		if !now.Before(u) {
			delete(m.until, k)
		}
	}
	m.until[key] = now.Add(ttl)
	return true, nil
}

func (m *MemoryClaims) Release(_ context.Context, key string) error {
	m.mu.Lock()
	delete(m.until, key)
	m.mu.Unlock()
	return nil
}
