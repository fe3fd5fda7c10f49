package cache

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/queue"
	"switchboard/internal/store/redistest"
)

// stores runs f against each store: memory and SQLite on the fake clock,
// Redis (its own clock: TTLs are checked, not waited for) on a real
// redis-server.
func stores(t *testing.T, f func(t *testing.T, st Store, clk *clock.Fake, redis bool)) {
	t.Run("memory", func(t *testing.T) {
		clk := clock.NewFake(time.Unix(1_700_000_000, 0))
		f(t, NewMemory(clk.Now), clk, false)
	})
	t.Run("sqlite", func(t *testing.T) {
		clk := clock.NewFake(time.Unix(1_700_000_000, 0))
		st, err := OpenSQLite(filepath.Join(t.TempDir(), "cache.db"), clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, st, clk, false)
	})
	t.Run("redis", func(t *testing.T) {
		rs := redistest.Start(t)
		c, err := queue.Dial(rs.URL, time.Second, time.Second, 8)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		f(t, NewRedis(c), clock.NewFake(time.Now()), true)
	})
}

func entry(body string) *Entry {
	return &Entry{Stored: time.UnixMilli(1_700_000_000_000), Status: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Chunks: [][]byte{[]byte(body)}, CostNano: 1234, Priced: true, Provider: "p", ProviderModel: "pm", ServedModel: "m"}
}

func TestStoreRoundTripAndTTL(t *testing.T) {
	stores(t, func(t *testing.T, st Store, clk *clock.Fake, redis bool) {
		ctx := context.Background()
		b := Bounds{MaxBytes: 1 << 20, TTL: time.Minute}
		if e, err := st.Get(ctx, "k1", ""); e != nil || err != nil {
			t.Fatalf("empty store: %v %v", e, err)
		}
		stream := &Entry{Stored: time.UnixMilli(1_700_000_000_000), Status: 200, Stream: true,
			Chunks: [][]byte{[]byte("data: a\n\n"), []byte("data: b\n\ndata: [DONE]\n\n")}}
		for k, e := range map[string]*Entry{"k1": entry(`{"a":1}`), "k2": stream} {
			if ok, err := st.Put(ctx, k, e, b); !ok || err != nil {
				t.Fatalf("put %s: %v %v", k, ok, err)
			}
			got, err := st.Get(ctx, k, "")
			if err != nil || got == nil {
				t.Fatalf("get %s: %v %v", k, got, err)
			}
			if !bytes.Equal(got.Encode(), e.Encode()) {
				t.Fatalf("%s came back different:\n%q\n%q", k, got.Encode(), e.Encode())
			}
		}
		if redis {
			// Redis keeps the TTL itself: it is set on the value.
			r := st.(*Redis)
			ms, err := r.c.PTTL(ctx, RedisPrefix+"e:k1:").Result()
			if err != nil || ms <= 0 || ms > time.Minute {
				t.Fatalf("value TTL %v %v", ms, err)
			}
			return
		}
		clk.Advance(time.Minute)
		if e, _ := st.Get(ctx, "k1", ""); e != nil {
			t.Fatal("an entry outlived its TTL")
		}
	})
}

// A partition's bytes stay within its budget: the least recently used
// entries go first, and another partition is not touched.
func TestStoreLRUBudget(t *testing.T) {
	stores(t, func(t *testing.T, st Store, clk *clock.Fake, redis bool) {
		ctx := context.Background()
		body := strings.Repeat("x", 1000)
		b := Bounds{Partition: "m", MaxBytes: 4*cost(st, "k0", entry(body)) + 10, TTL: time.Hour}
		other := Bounds{Partition: "other", MaxBytes: 1 << 20, TTL: time.Hour}
		if ok, _ := st.Put(ctx, "keep-other", entry(body), other); !ok {
			t.Fatal("put in the other partition")
		}
		for i := range 4 {
			if ok, err := st.Put(ctx, fmt.Sprintf("k%d", i), entry(body), b); !ok || err != nil {
				t.Fatalf("put k%d: %v %v", i, ok, err)
			}
			clk.Advance(2 * time.Minute) // past the SQLite LRU clock's granularity
		}
		if redis {
			time.Sleep(2 * time.Millisecond) // Redis's own clock orders the LRU
		}
		// k0 is used: it becomes the most recent; k1 is now the oldest.
		if e, _ := st.Get(ctx, "k0", "m"); e == nil {
			t.Fatal("k0 missing before eviction")
		}
		if s, ok := st.(*SQLite); ok {
			waitTouched(t, s, "k0")
		}
		clk.Advance(2 * time.Minute)
		for i := 4; i < 6; i++ {
			if redis {
				time.Sleep(2 * time.Millisecond)
			}
			if ok, err := st.Put(ctx, fmt.Sprintf("k%d", i), entry(body), b); !ok || err != nil {
				t.Fatalf("put k%d: %v %v", i, ok, err)
			}
		}
		present := map[string]bool{}
		for _, k := range []string{"k0", "k1", "k2", "k3", "k4", "k5"} {
			e, _ := st.Get(ctx, k, "m")
			present[k] = e != nil
		}
		if !present["k0"] || present["k1"] || present["k2"] || !present["k5"] {
			t.Fatalf("LRU order not kept: %v", present)
		}
		if e, _ := st.Get(ctx, "keep-other", "other"); e == nil {
			t.Fatal("another partition's entry was evicted")
		}
		if h, ok := st.(Held); ok {
			n, err := h.Held(ctx)
			if err != nil || n > b.MaxBytes+other.MaxBytes {
				t.Fatalf("held %d (%v)", n, err)
			}
		}
		// An entry bigger than the whole budget is refused, not stored.
		if ok, _ := st.Put(ctx, "huge", entry(strings.Repeat("y", int(b.MaxBytes))), b); ok {
			t.Fatal("an entry over the budget was stored")
		}
	})
}

// cost is what one entry counts against a partition of st.
func cost(st Store, key string, e *Entry) int64 {
	switch st.(type) {
	case *SQLite:
		return int64(len(e.Encode())+len(key)) + rowOverhead
	case *Redis:
		return int64(len(e.Encode())+len(key)) + redisOverhead
	}
	return e.Size() + int64(len(key)) + itemOverhead
}

// waitTouched waits until the SQLite store's writer recorded k's use.
func waitTouched(t *testing.T, s *SQLite, k string) {
	t.Helper()
	want := s.now().UnixMilli()
	for range 500 {
		var used int64
		if err := s.db.QueryRow(`SELECT used_ms FROM cache_entries WHERE k = ?`, k).Scan(&used); err == nil && used >= want {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("the last use was never written")
}

// A flood of distinct answers keeps the store within its budget.
func TestStoreFloodStaysBounded(t *testing.T) {
	stores(t, func(t *testing.T, st Store, _ *clock.Fake, _ bool) {
		ctx := context.Background()
		b := Bounds{MaxBytes: 64 << 10, TTL: time.Hour}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 300 {
					if _, err := st.Put(ctx, fmt.Sprintf("w%d-%d", w, i), entry(strings.Repeat("z", 100+i%500)), b); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		n, err := st.(Held).Held(ctx)
		if err != nil || n > b.MaxBytes || n < b.MaxBytes/2 {
			t.Fatalf("held %d of %d (%v)", n, b.MaxBytes, err)
		}
		if m, ok := st.(*Memory); ok && m.Len() > int(b.MaxBytes/itemOverhead) {
			t.Fatalf("%d entries", m.Len())
		}
	})
}

func TestEntryDecodeRefusesMalformed(t *testing.T) {
	good := entry(`{"x":1}`).Encode()
	for _, b := range [][]byte{nil, []byte("{}"), []byte(`{"v":1,"c":[5]}` + "\nabc"), []byte(`{"v":2,"c":[]}` + "\n"),
		append(append([]byte{}, good...), 'x'), good[:len(good)-1]} {
		if _, err := Decode(b); err == nil {
			t.Errorf("decoded %q", b)
		}
	}
}
