package store

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/health"
	"switchboard/internal/limit"
	"switchboard/internal/store/redistest"
)

// openCluster is a store on c in cluster mode.
func openCluster(t *testing.T, c *redistest.Cluster) *Redis {
	t.Helper()
	r, err := OpenRedis(RedisOptions{URL: c.URL, Cluster: true, Seeds: c.Seeds, CommandTimeout: 10 * time.Second,
		ProbeInterval: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if !r.Available() {
		t.Fatal("the cluster store starts unavailable")
	}
	return r
}

// clusterFlavors runs f on a three-master cluster of each server
// installed (Redis, and Valkey when present).
func clusterFlavors(t *testing.T, f func(t *testing.T, c *redistest.Cluster)) {
	flavors := redistest.Flavors()
	if len(flavors) == 0 {
		flavors = []string{"redis"} // StartClusterOf says what is missing
	}
	for _, fl := range flavors {
		t.Run(fl, func(t *testing.T) { f(t, redistest.StartClusterOf(t, fl)) })
	}
}

// One decision's keys sit on different masters of a cluster: the
// tenant's bucket and ledger, the gateway's bucket, the provider's. Each
// owner decides its own share; a refusal by any takes back the others,
// exactly, and settlements and reads cross the slots too.
func TestRedisClusterDecisionsAcrossSlots(t *testing.T) {
	clusterFlavors(t, func(t *testing.T, c *redistest.Cluster) {
		s := openCluster(t, c)
		if c.MasterOf(holdsKey("acme")) == c.MasterOf(bucketKey("p:x:rpm")) &&
			c.MasterOf(bucketKey("g:rpm")) == c.MasterOf(holdsKey("acme")) {
			t.Fatal("the test's owners share one master; pick other names")
		}
		now := time.Now()
		ds := func() []limit.Debit {
			return []limit.Debit{{Key: "t:acme:rpm", Rate: perHour(3), Cost: 1}, {Key: "g:rpm", Rate: perHour(100), Cost: 1},
				{Key: "p:x:rpm", Group: "p:x", Rate: perHour(5), Cost: 1}}
		}
		peek := func() (int64, int64, int64) {
			t.Helper()
			snaps, err := s.Peek(ctx, now, ds())
			if err != nil {
				t.Fatal(err)
			}
			return snaps[0].Remaining, snaps[1].Remaining, snaps[2].Remaining
		}
		var ids []*Decision
		for i := range 3 {
			a := adm(now, "acme", func(a *Admission) { a.Debits = ds() })
			d, err := s.Admit(ctx, a)
			if err != nil || d.Refused != Admitted || len(d.Snapshots) != 3 {
				t.Fatalf("admission %d: %+v %v", i, d, err)
			}
			if d.Snapshots[2].Remaining != int64(4-i) || d.Snapshots[0].Remaining != int64(2-i) {
				t.Fatalf("admission %d snapshots %+v", i, d.Snapshots)
			}
			ids = append(ids, d)
		}
		// The tenant's bucket refuses the fourth: the gateway's and the
		// provider's debits are given back.
		d, err := s.Admit(ctx, adm(now, "acme", func(a *Admission) { a.Debits = ds() }))
		if err != nil || d.Refused != RefusedRate || d.Index != 0 || d.Snapshot.Limit != 3 {
			t.Fatalf("fourth: %+v %v", d, err)
		}
		if tr, g, p := peek(); tr != 0 || g != 97 || p != 2 {
			t.Fatalf("after a refusal by the tenant: tenant %d global %d provider %d left, want 0 97 2", tr, g, p)
		}
		u, err := s.Usage(ctx, UsageQuery{Now: now, Tenant: "acme", WindowSecs: 3600})
		if err != nil || u.Requests != 3 || u.Tokens != 30 {
			t.Fatalf("usage %+v %v (the refused request must not count)", u, err)
		}

		// Another tenant's budget refuses: its buckets are given back.
		budget := func(a *Admission) {
			a.Debits = []limit.Debit{{Key: "g:rpm", Rate: perHour(100), Cost: 1}, {Key: "p:x:rpm", Group: "p:x", Rate: perHour(5), Cost: 1}}
			a.Budgeted, a.Budget, a.Hold = true, 1000, 600
		}
		held, err := s.Admit(ctx, adm(now, "bee", budget))
		if err != nil || held.Refused != Admitted || !held.Recorded || held.Held != 600 {
			t.Fatalf("budgeted: %+v %v", held, err)
		}
		if n, err := s.LiveHolds(ctx); err != nil || n != 1 {
			t.Fatalf("live holds %d %v", n, err)
		}
		d, err = s.Admit(ctx, adm(now, "bee", budget))
		if err != nil || d.Refused != RefusedBudget || d.Spent != 600 {
			t.Fatalf("over budget: %+v %v", d, err)
		}
		if _, g, p := peek(); g != 96 || p != 1 {
			t.Fatalf("after a budget refusal: global %d provider %d left, want 96 1", g, p)
		}

		// A settlement gives back the provider's request once, however
		// often it is sent: its ledger's slot decides, the others follow.
		st := &Settlement{Now: now, ID: "", Tenant: "acme", Minute: ids[0].Minute, WindowSecs: 3600,
			WindowStart: ids[0].WindowStart, Final: true,
			Adjust: []limit.Debit{{Key: "p:x:rpm", Group: "p:x", Rate: perHour(5), Cost: -1}, {Key: "t:acme:rpm", Rate: perHour(3), Cost: -1}}}
		st.ID = "settle-once"
		for range 3 {
			if err := s.Settle(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		if tr, _, p := peek(); tr != 1 || p != 2 {
			t.Fatalf("after the settlement: tenant %d provider %d left, want 1 2", tr, p)
		}
		done := make(chan error, 1)
		st.ID = "settle-async"
		s.SettleAsync(st, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if tr, _, p := peek(); tr != 2 || p != 3 {
			t.Fatalf("after the async settlement: tenant %d provider %d left, want 2 3", tr, p)
		}

		// Health records of providers in different slots, read at once.
		h := s.Health()
		for _, p := range []string{"a", "b", "c", "d"} {
			if _, err := h.Publish(ctx, p, health.Event{Kind: health.Opened, TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
		recs, err := h.Fetch(ctx, []string{"a", "b", "c", "d", "none"})
		if err != nil || len(recs) != 4 || recs["c"].Open == 0 {
			t.Fatalf("fetch %+v %v", recs, err)
		}
	})
}

// Three replicas decide one provider's and one tenant's buckets at once:
// the cluster admits exactly the limit.
func TestRedisClusterExactUnderLoad(t *testing.T) {
	c := redistest.StartCluster(t)
	stores := []*Redis{openCluster(t, c), openCluster(t, c), openCluster(t, c)}
	now := time.Now()
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 90 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := adm(now, "acme", func(a *Admission) {
				a.Debits = []limit.Debit{{Key: "t:acme:rpm", Rate: perHour(50), Cost: 1}, {Key: "p:x:rpm", Group: "p:x", Rate: perHour(20), Cost: 1}}
			})
			d, err := stores[i%3].Admit(ctx, a)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Refused == Admitted {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 20 {
		t.Fatalf("%d admitted, want exactly the provider's 20", ok.Load())
	}
	// Every refusal by the provider gave the tenant's debit back. (A
	// replica queues its take-backs before its own later calls: closing
	// the other two sends theirs.)
	stores[1].Close()
	stores[2].Close()
	snaps, err := stores[0].Peek(ctx, now, []limit.Debit{{Key: "t:acme:rpm", Rate: perHour(50)}})
	if err != nil || snaps[0].Remaining != 30 {
		t.Fatalf("tenant bucket %+v %v, want 30 left", snaps, err)
	}
}

// redis.sentinel: the store finds the primary through a sentinel and
// decides there.
func TestRedisSentinel(t *testing.T) {
	primary := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, primary, "sb")
	s, err := OpenRedis(RedisOptions{URL: "redis://ignored/0", Sentinel: config.RedisSentinel{Master: "sb", Addrs: []string{sentinel}},
		CommandTimeout: 10 * time.Second, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Available() {
		t.Fatal("unavailable through the sentinel")
	}
	a := adm(time.Now(), "acme", func(a *Admission) {
		a.Debits = []limit.Debit{{Key: "p:x:rpm", Group: "p:x", Rate: perHour(5), Cost: 1}}
		a.Budgeted, a.Budget, a.Hold = true, 100, 10
	})
	if d, err := s.Admit(ctx, a); err != nil || d.Refused != Admitted || !d.Recorded {
		t.Fatalf("%+v %v", d, err)
	}
	// It is the primary's data.
	if n := rawClient(t, primary).ZCard(ctx, holdsKey("acme")).Val(); n != 1 {
		t.Fatalf("%d live holds on the primary", n)
	}
}
