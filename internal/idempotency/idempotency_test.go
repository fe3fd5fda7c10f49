package idempotency

import (
	"context"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/store"
	"switchboard/internal/store/redistest"
)

var bg = context.Background()

// sk is scope s of one tenant.
func sk(s string) Key { return Key{Tenant: "acme", Scope: s} }

// stores builds each backend with lim; advance moves the clock of those
// that take one (Redis expires on its own TIME and is not moved).
func stores(t *testing.T, lim Limits) map[string]struct {
	s       Store
	advance func(time.Duration)
} {
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clk := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	adv := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	st, err := store.OpenSQLite(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sq, err := NewSQLite(store.SQLiteDB(st), lim, clk)
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return map[string]struct {
		s       Store
		advance func(time.Duration)
	}{
		"memory": {NewMemory(lim, clk), adv},
		"sqlite": {sq, adv},
		"redis":  {NewRedis(c, lim), nil},
	}
}

func TestClaimFinishReplayConflict(t *testing.T) {
	lim := Limits{TTL: time.Hour, MaxEntries: 2, MaxBytes: 1 << 10, MaxTotal: 1 << 20}
	for name, b := range stores(t, lim) {
		t.Run(name, func(t *testing.T) {
			s := b.s
			st, _, tok, err := s.Claim(bg, sk("k1"), "h1", time.Minute)
			if err != nil || st != Fresh || tok == "" {
				t.Fatalf("first claim %v %q %v", st, tok, err)
			}
			if st, _, _, _ := s.Claim(bg, sk("k1"), "h1", time.Minute); st != Pending {
				t.Fatalf("duplicate while running: %v", st)
			}
			if st, _, _, _ := s.Claim(bg, sk("k1"), "h2", time.Minute); st != Conflict {
				t.Fatalf("other body: %v", st)
			}
			rec := &Record{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"a":1}` + "\n")}
			if ok, err := s.Finish(bg, sk("k1"), "not-the-token", rec); ok || err != nil {
				t.Fatalf("finish with a foreign token: %v %v", ok, err)
			}
			if ok, err := s.Finish(bg, sk("k1"), tok, rec); !ok || err != nil {
				t.Fatalf("finish: %v %v", ok, err)
			}
			st, got, _, err := s.Claim(bg, sk("k1"), "h1", time.Minute)
			if st != Replay || err != nil || got.Status != 200 || string(got.Body) != string(rec.Body) ||
				got.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("replay %v %+v %v", st, got, err)
			}
			// Released keys run again; oversized answers are not kept.
			_, _, tok2, _ := s.Claim(bg, sk("k2"), "h", time.Minute)
			s.Release(bg, sk("k2"), tok2)
			if st, _, tok3, _ := s.Claim(bg, sk("k2"), "h", time.Minute); st != Fresh {
				t.Fatalf("after release: %v", st)
			} else if ok, err := s.Finish(bg, sk("k2"), tok3, &Record{Status: 200, Body: make([]byte, 2<<10)}); ok || err == nil {
				t.Fatalf("oversized answer stored: %v %v", ok, err)
			}
			if b.advance != nil {
				b.advance(2 * time.Hour)
				if st, _, _, _ := s.Claim(bg, sk("k1"), "h1", time.Minute); st != Fresh {
					t.Fatalf("after the ttl: %v", st)
				}
			}
		})
	}
}

// The count bound holds: beyond MaxEntries, answers are not stored.
func TestEntryBound(t *testing.T) {
	lim := Limits{TTL: time.Hour, MaxEntries: 3, MaxBytes: 1 << 10, MaxTotal: 1 << 20}
	for name, b := range stores(t, lim) {
		t.Run(name, func(t *testing.T) {
			stored := 0
			for i := range 10 {
				k := string(rune('a' + i))
				_, _, tok, _ := b.s.Claim(bg, sk(k), "h", time.Minute)
				if ok, _ := b.s.Finish(bg, sk(k), tok, &Record{Status: 200, Body: []byte("x")}); ok {
					stored++
				}
			}
			if stored > 4 || stored < 2 {
				t.Fatalf("stored %d answers with max_entries 3", stored)
			}
		})
	}
}

// 20 concurrent claims of one key: exactly one runs.
func TestConcurrentClaimsOneWinner(t *testing.T) {
	lim := Limits{TTL: time.Hour, MaxEntries: 100, MaxBytes: 1 << 10, MaxTotal: 1 << 20}
	for name, b := range stores(t, lim) {
		t.Run(name, func(t *testing.T) {
			var fresh atomic.Int64
			var wg sync.WaitGroup
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if st, _, _, err := b.s.Claim(bg, sk("same"), "h", time.Minute); err == nil && st == Fresh {
						fresh.Add(1)
					}
				}()
			}
			wg.Wait()
			if fresh.Load() != 1 {
				t.Fatalf("%d winners", fresh.Load())
			}
		})
	}
}

// Expired answers free their room: a full store takes new answers once
// the old ones are past their TTL (and counts the room again after).
func TestExpiredAnswersFreeRoom(t *testing.T) {
	lim := Limits{TTL: time.Hour, MaxEntries: 2, MaxBytes: 1 << 10, MaxTotal: 1 << 20}
	for name, b := range stores(t, lim) {
		if b.advance == nil {
			continue // Redis expires on its own clock
		}
		t.Run(name, func(t *testing.T) {
			finish := func(k string) bool {
				_, _, tok, err := b.s.Claim(bg, sk(k), "h", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				ok, _ := b.s.Finish(bg, sk(k), tok, &Record{Status: 200, Body: []byte("x")})
				return ok
			}
			if !finish("a") || finish("b") && finish("c") {
				t.Fatal("the entry bound did not hold before the ttl")
			}
			b.advance(2 * time.Hour)
			if !finish("d") || finish("e") && finish("f") {
				t.Fatal("expired answers did not free their room, or were counted twice")
			}
		})
	}
}

// A claim is a lease: renewed, it outlives its first lease; not renewed
// (its owner died), it lapses and the next claim is Fresh with another
// token, and the dead owner can neither renew nor finish it.
func TestClaimIsALease(t *testing.T) {
	lim := Limits{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 10, MaxTotal: 1 << 20}
	const lease = 300 * time.Millisecond
	for name, b := range stores(t, lim) {
		t.Run(name, func(t *testing.T) {
			s := b.s
			wait := func(d time.Duration) {
				if b.advance != nil {
					b.advance(d)
				} else {
					time.Sleep(d) // Redis expires on its own clock
				}
			}
			_, _, tok, err := s.Claim(bg, sk("k"), "h", lease)
			if err != nil || tok == "" {
				t.Fatal(err)
			}
			for range 3 { // three renewals carry it past three leases
				wait(lease / 2)
				if ok, err := s.Renew(bg, sk("k"), tok, lease); !ok || err != nil {
					t.Fatalf("renew: %v %v", ok, err)
				}
				if st, _, _, _ := s.Claim(bg, sk("k"), "h", lease); st != Pending {
					t.Fatalf("a renewed claim: %v", st)
				}
			}
			wait(lease + 100*time.Millisecond) // the owner stopped renewing
			st, _, tok2, err := s.Claim(bg, sk("k"), "h", lease)
			if st != Fresh || tok2 == tok || err != nil {
				t.Fatalf("after the lease lapsed: %v %v", st, err)
			}
			if ok, _ := s.Renew(bg, sk("k"), tok, lease); ok {
				t.Fatal("the dead owner renewed the new claim")
			}
			if ok, _ := s.Finish(bg, sk("k"), tok, &Record{Status: 200}); ok {
				t.Fatal("the dead owner finished the new claim")
			}
			if ok, err := s.Finish(bg, sk("k"), tok2, &Record{Status: 200}); !ok || err != nil {
				t.Fatalf("the new owner's finish: %v %v", ok, err)
			}
			if ok, _ := s.Renew(bg, sk("k"), tok2, lease); ok {
				t.Fatal("a finished answer was renewed as a claim")
			}
		})
	}
}

// A SQLite file belongs to one process: a claim pending when it opens
// the file was its dead predecessor's and is dropped at once.
func TestSQLiteDropsADeadProcessClaims(t *testing.T) {
	lim := Limits{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 10, MaxTotal: 1 << 20}
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := store.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSQLite(store.SQLiteDB(st), lim, nil)
	s.Claim(bg, sk("running"), "h", time.Hour)
	_, _, tok, _ := s.Claim(bg, sk("done"), "h", time.Hour)
	s.Finish(bg, sk("done"), tok, &Record{Status: 200, Body: []byte("x")})
	st.Close()
	st, err = store.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err = NewSQLite(store.SQLiteDB(st), lim, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _, _ := s.Claim(bg, sk("running"), "h", time.Hour); got != Fresh {
		t.Fatalf("the dead process's claim: %v", got)
	}
	if got, rec, _, _ := s.Claim(bg, sk("done"), "h", time.Hour); got != Replay || string(rec.Body) != "x" {
		t.Fatalf("a stored answer: %v", got)
	}
}
