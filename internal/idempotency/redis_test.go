package idempotency

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/redisconn"
	"switchboard/internal/store/redistest"
)

// On Redis the entry and byte bounds are each tenant's: a tenant that
// filled its share gets no more answers stored, another tenant still
// does.
func TestRedisBoundsPerTenant(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s := NewRedis(c, Limits{TTL: time.Hour, MaxEntries: 2, MaxBytes: 1 << 10, MaxTotal: 1 << 20})
	store := func(tenant, scope string) bool {
		k := Key{Tenant: tenant, Scope: scope}
		st, _, tok, err := s.Claim(bg, k, "h", time.Minute)
		if err != nil || st != Fresh {
			t.Fatalf("claim %v: %v %v", k, st, err)
		}
		ok, err := s.Finish(bg, k, tok, &Record{Status: 200, Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	stored := 0
	for i := range 5 {
		if store("busy", fmt.Sprint(i)) {
			stored++
		}
	}
	if stored != 2 {
		t.Fatalf("the busy tenant stored %d answers, want its max_entries 2", stored)
	}
	if !store("quiet", "0") || !store("quiet", "1") {
		t.Fatal("another tenant's answers were refused by the busy tenant's bound")
	}
	// The same scope under another tenant is another record.
	if st, _, _, _ := s.Claim(bg, Key{Tenant: "quiet", Scope: "4"}, "h", time.Minute); st != Fresh {
		t.Fatalf("another tenant's scope: %v", st)
	}
}

// In a Redis Cluster each tenant's records and their accounting share
// the tenant's slot, the one its ledger is tagged with ({t:<tenant>}),
// so tenants spread over the masters; duplicates are coalesced per
// tenant there as on one server. A tenant whose name has a '}' keeps
// every key in one slot.
func TestRedisClusterTenantSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node cluster")
	}
	cl := redistest.StartCluster(t)
	c, err := redisconn.Dial(redisconn.Options{URL: cl.URL, Cluster: true, Seeds: cl.Seeds,
		CommandTimeout: 10 * time.Second, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := NewRedis(c, Limits{TTL: time.Hour, MaxEntries: 100, MaxBytes: 1 << 10, MaxTotal: 1 << 20})
	tenants := []string{"alpha", "beta", "a}b"}
	// Ten concurrent duplicates per tenant, of the same scope: one runs
	// in each tenant, the others wait for it.
	for _, tn := range tenants {
		k := Key{Tenant: tn, Scope: "same"}
		var mu sync.Mutex
		var toks []string
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				st, _, tok, err := s.Claim(bg, k, "h", time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if st == Fresh {
					mu.Lock()
					toks = append(toks, tok)
					mu.Unlock()
				} else if st != Pending {
					t.Errorf("%s: a duplicate got %v", tn, st)
				}
			})
		}
		wg.Wait()
		if len(toks) != 1 {
			t.Fatalf("%s: %d of 10 duplicates ran, want 1", tn, len(toks))
		}
		if ok, err := s.Finish(bg, k, toks[0], &Record{Status: 200, Body: []byte(tn)}); !ok || err != nil {
			t.Fatalf("%s: finish %v %v", tn, ok, err)
		}
		if st, rec, _, err := s.Claim(bg, k, "h", time.Minute); st != Replay || err != nil || string(rec.Body) != tn {
			t.Fatalf("%s: the repeat got %v %v", tn, st, err)
		}
	}
	// Every key, wherever it lives, is in its tenant's slot.
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var ks []string
	err = c.(*redis.ClusterClient).ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		found, err := n.Keys(ctx, RedisPrefix+"*").Result()
		mu.Lock()
		ks = append(ks, found...)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slotOf := func(k string) int64 {
		n, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	want := map[string]int64{ // each tenant's ledger tag, as docs/fleet.md lists it
		"alpha": slotOf("{t:alpha}"), "beta": slotOf("{t:beta}"), "a}b": slotOf("{t:a}"),
	}
	if want["alpha"] == want["beta"] {
		t.Fatal("the test's tenants share a slot; pick others")
	}
	per := map[string]int{}
	for _, k := range ks {
		tn := ""
		for _, cand := range tenants {
			if strings.HasPrefix(k, RedisPrefix+"{t:"+cand+"}:") {
				tn = cand
			}
		}
		if tn == "" {
			t.Fatalf("a key of no tenant: %q", k)
		}
		per[tn]++
		if got := slotOf(k); got != want[tn] {
			t.Errorf("%q is in slot %d, its tenant's slot is %d", k, got, want[tn])
		}
	}
	for _, tn := range tenants {
		// The entry, its index, its size and the byte total.
		if per[tn] != 4 {
			t.Errorf("%s has %d keys, want 4: %q", tn, per[tn], ks)
		}
	}
}
