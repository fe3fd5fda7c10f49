package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/admin"
	"switchboard/internal/admit"
	"switchboard/internal/config"
	"switchboard/internal/store/redistest"
	"switchboard/internal/usagelog"
)

// startAdminFleet serves yaml on n replicas sharing one redis-server for
// admission and for the admin API's records, each following the others'
// admin changes as the binary does.
func startAdminFleet(t *testing.T, n int, yaml string) ([]*gateway, *redistest.Server) {
	t.Helper()
	rs := redistest.Start(t)
	return startAdminFleetAt(t, singleAt(rs), n, yaml), rs
}

// startAdminFleetAt is startAdminFleet on the Redis at.
func startAdminFleetAt(t *testing.T, at redisAt, n int, yaml string) []*gateway {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "fleet.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	out := make([]*gateway, n)
	for i := range out {
		logs, log := replicaLog(i)
		st := at.store(t, log)
		c := at.client(t, 8, 10*time.Second)
		s := New(log, nil, nil)
		// Each replica writes its own usage log file (rows of the requests
		// it served).
		db, err := usagelog.Open(filepath.Join(t.TempDir(), usagelog.DefaultFile))
		if err != nil {
			t.Fatal(err)
		}
		ul := usagelog.NewLog(db, usagelog.Options{Registerer: s.Metrics.Registry, Log: log})
		t.Cleanup(func() { ul.Close(); db.Close() })
		s.SetUsageLog(ul)
		s.Admission = admit.New(st, s.Clock, s.Metrics.Registry)
		s.JoinFleet(st)
		if err := s.SetAdminStore(ctx, admin.NewRedis(c)); err != nil {
			t.Fatal(err)
		}
		s.Apply(cfg)
		wg.Add(1)
		go func() { defer wg.Done(); s.FollowAdmin(ctx) }()
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(ts.Close)
		out[i] = &gateway{Server: s, URL: ts.URL, logs: logs, t: t}
	}
	return out
}

// untilStatus polls every replica with key until each answers want, and
// returns how long each took; it gives up after limit.
func untilStatus(fleet []*gateway, key string, want int, limit time.Duration) []time.Duration {
	took := make([]time.Duration, len(fleet))
	var wg sync.WaitGroup
	start := time.Now()
	for i, g := range fleet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < limit {
				a, err := send(g.URL, chatBody, "Authorization", "Bearer "+key)
				if err == nil && a.Status == want {
					took[i] = time.Since(start)
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			took[i] = -1
		}()
	}
	wg.Wait()
	return took
}

// TestAdminFleetRevoke is the end-to-end test: a key created on
// one replica of a 3-replica fleet (one real redis-server) works on every
// replica within a second; its requests have usage rows naming it, whose
// cost sums to the ledger's settled spend to the nano-USD; revoked on
// another replica, it gets 401 on every replica within a second. Tenant
// keys are refused by the admin API on every replica.
func TestAdminFleetRevoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	adminRevoke(t, singleAt(redistest.Start(t)))
}

func adminRevoke(t *testing.T, at redisAt) {
	fleet := startAdminFleetAt(t, at, 3, mockYAML("m", "a")+`pricing:
  a: {a-model: {input: 3, output: 15, context: 10000, max_output: 100}}
auth:
  keys:
    sk-ops: {tenant: ops, role: admin}
    sk-acme: {tenant: acme}
`)
	for i, g := range fleet {
		if a := g.post("/admin/v1/keys", `{"name":"x","tenant":"acme"}`, "Authorization", "Bearer sk-acme"); a.Status != 403 {
			t.Errorf("replica %d: a tenant key on the admin API: %d %s", i+1, a.Status, a.Body)
		}
	}
	a := fleet[0].post("/admin/v1/keys", `{"name":"fleet-key","tenant":"acme"}`, "Authorization", "Bearer sk-ops")
	if a.Status != 201 {
		t.Fatalf("create: %d %s", a.Status, a.Body)
	}
	secret, id := gjson.Get(a.Body, "secret").String(), gjson.Get(a.Body, "id").String()
	if took := untilStatus(fleet, secret, 200, time.Second); strings.Contains(slogDurations(took), "-1") {
		t.Fatalf("the new key did not work on every replica within 1 s: %s", slogDurations(took))
	} else {
		t.Logf("created on replica 1; usable on replicas 1-3 after %s", slogDurations(took))
	}
	// Each replica's usage rows name the key; their cost, summed over the
	// fleet, is the ledger's settled spend of its tenant, to the nano-USD.
	// A request's row is queued once all its attempts have ended, which can
	// be just after its answer, and its settlement lands just after too:
	// read both until they agree (or 5 s pass).
	sum := func() (rows, cost int64, bad []string) {
		for i, g := range fleet {
			if err := g.UsageLog().Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			a := g.get("/admin/v1/requests?key="+id, "Authorization", "Bearer sk-ops")
			for _, r := range gjson.Get(a.Body, "data").Array() {
				if r.Get("key_id").String() != id || r.Get("tenant").String() != "acme" || r.Get("status").Int() != 200 || r.Get("cost_nano_usd").Int() <= 0 {
					bad = append(bad, fmt.Sprintf("replica %d: usage row %s", i+1, r.Raw))
				}
				rows++
			}
			u := g.get("/admin/v1/usage?group_by=key&key="+id, "Authorization", "Bearer sk-ops")
			cost += gjson.Get(u.Body, "total.cost_nano_usd").Int()
		}
		return rows, cost, bad
	}
	settled := func() int64 {
		u := fleet[2].get("/v1/usage", "Authorization", "Bearer "+secret)
		return gjson.Get(u.Body, "spend.settled_nano_usd").Int()
	}
	rows, cost, bad := sum()
	for start := time.Now(); settled() != cost && time.Since(start) < 5*time.Second; rows, cost, bad = sum() {
		time.Sleep(10 * time.Millisecond)
	}
	for _, b := range bad {
		t.Error(b)
	}
	if rows < 3 || cost <= 0 || settled() != cost {
		t.Errorf("%d usage rows cost %d nano-USD; the ledger settled %d", rows, cost, settled())
	}
	t.Logf("%d usage rows of %s over 3 replicas, %d nano-USD = the ledger's settled spend", rows, id, cost)

	req, _ := http.NewRequest(http.MethodDelete, fleet[1].URL+"/admin/v1/keys/"+id, nil)
	req.Header.Set("Authorization", "Bearer sk-ops")
	if a := fleet[1].do(req); a.Status != 200 {
		t.Fatalf("revoke: %d %s", a.Status, a.Body)
	}
	took := untilStatus(fleet, secret, 401, time.Second)
	if strings.Contains(slogDurations(took), "-1") {
		t.Fatalf("the revoked key was not refused on every replica within 1 s: %s", slogDurations(took))
	}
	t.Logf("revoked on replica 2; 401 on replicas 1-3 after %s", slogDurations(took))
	// Every replica lists it as revoked, and the audit log is shared.
	for i, g := range fleet {
		if a := g.get("/admin/v1/keys/"+id, "Authorization", "Bearer sk-ops"); !gjson.Get(a.Body, "revoked").Bool() {
			t.Errorf("replica %d shows %s", i+1, a.Body)
		}
		if a := g.get("/admin/v1/audit", "Authorization", "Bearer sk-ops"); gjson.Get(a.Body, "data.#.action").String() != `["key.create","key.revoke"]` {
			t.Errorf("replica %d audit: %s", i+1, a.Body)
		}
	}
}

func slogDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		if d < 0 {
			parts[i] = "-1"
			continue
		}
		parts[i] = d.Round(time.Millisecond).String()
	}
	return strings.Join(parts, ", ")
}

// TestAdminRedisDown: with Redis gone, replicas keep serving the issued
// keys they read last, and the admin API answers 503 store_unavailable
// (nothing half written, nothing claimed).
func TestAdminRedisDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	fleet, rs := startAdminFleet(t, 2, mockYAML("m", "a")+"auth:\n  keys:\n    sk-ops: {tenant: ops, role: admin}\n    sk-acme: {tenant: acme}\n")
	a := fleet[0].post("/admin/v1/keys", `{"name":"k","tenant":"acme"}`, "Authorization", "Bearer sk-ops")
	secret := gjson.Get(a.Body, "secret").String()
	if took := untilStatus(fleet, secret, 200, time.Second); strings.Contains(slogDurations(took), "-1") {
		t.Fatalf("key not live: %s", slogDurations(took))
	}
	rs.Kill()
	for i, g := range fleet {
		if a := g.post("/admin/v1/keys", `{"name":"k2","tenant":"acme"}`, "Authorization", "Bearer sk-ops"); a.Status != 503 ||
			gjson.Get(a.Body, "error.code").String() != "store_unavailable" || a.Header.Get("Retry-After") == "" {
			t.Errorf("replica %d: create with redis down: %d %s", i+1, a.Status, a.Body)
		}
		if a := g.get("/admin/v1/keys", "Authorization", "Bearer sk-ops"); a.Status != 503 {
			t.Errorf("replica %d: list with redis down: %d %s", i+1, a.Status, a.Body)
		}
		if a := chatAs(g, secret, "m"); a.Status != 200 {
			t.Errorf("replica %d: the issued key with redis down: %d %s", i+1, a.Status, a.Body)
		}
	}
}
