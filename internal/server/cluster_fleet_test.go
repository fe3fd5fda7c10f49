package server

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"switchboard/internal/config"
	"switchboard/internal/redisconn"
	"switchboard/internal/store"
	"switchboard/internal/store/redistest"
)

// redisAt is where a test fleet's shared state lives: one redis-server,
// a Redis Cluster (redis.cluster: true), or a primary found through
// Sentinel (redis.sentinel).
type redisAt struct {
	url      string
	cluster  bool
	seeds    []string
	sentinel config.RedisSentinel
}

func singleAt(s *redistest.Server) redisAt { return redisAt{url: s.URL} }

func clusterAt(c *redistest.Cluster) redisAt {
	return redisAt{url: c.URL, cluster: true, seeds: c.Seeds}
}

// sentinelAt finds the primary through g's sentinels; the URL's host is
// unused.
func sentinelAt(g *redistest.Sentinels) redisAt {
	return redisAt{url: "redis://sentinel-finds-it/0", sentinel: config.RedisSentinel{Master: g.Master, Addrs: g.Addrs}}
}

// store opens a replica's admission store. A long command timeout: these
// tests are about what is shared, and on a loaded 2-core machine a 500 ms
// timeout sends a replica to its in-process fallback (rates fail open)
// and admits too much. A killed server still refuses at once.
func (r redisAt) store(t *testing.T, log *slog.Logger) *store.Redis {
	t.Helper()
	st, err := store.OpenRedis(store.RedisOptions{URL: r.url, Cluster: r.cluster, Seeds: r.seeds, Sentinel: r.sentinel,
		ProbeInterval: 50 * time.Millisecond, CommandTimeout: 10 * time.Second, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// client opens a client for the queue, idempotency or admin records.
func (r redisAt) client(t *testing.T, pool int, command time.Duration) redis.UniversalClient {
	t.Helper()
	c, err := redisconn.Dial(redisconn.Options{URL: r.url, Cluster: r.cluster, Seeds: r.seeds, SentinelMaster: r.sentinel.Master,
		SentinelAddrs: r.sentinel.Addrs, CommandTimeout: command, ConnectTimeout: 5 * time.Second, PoolSize: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// yaml is the config's redis section as a flow mapping.
func (r redisAt) yaml() string {
	if r.sentinel.Master != "" {
		return fmt.Sprintf("{url: %q, sentinel: {master: %q, addrs: [%s]}}", r.url, r.sentinel.Master,
			`"`+strings.Join(r.sentinel.Addrs, `", "`)+`"`)
	}
	if !r.cluster {
		return fmt.Sprintf("{url: %q}", r.url)
	}
	return fmt.Sprintf("{url: %q, cluster: true, seeds: [%s]}", r.url, `"`+strings.Join(r.seeds, `", "`)+`"`)
}

// The fleet tests, on a three-master Redis Cluster (and a Valkey one
// when valkey-server is installed): every shared keyspace works there as
// on one server.
func TestClusterFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node cluster")
	}
	flavors := redistest.Flavors()
	if len(flavors) == 0 {
		flavors = []string{"redis"} // StartClusterOf says what is missing
	}
	for _, fl := range flavors {
		t.Run(fl, func(t *testing.T) {
			c := redistest.StartClusterOf(t, fl)
			for _, tc := range []struct {
				name string
				f    func(*testing.T, redisAt)
			}{
				{"provider rpm exact across three replicas", providerBucketShared},
				{"budget holds to the nano-USD", spendCapHolds},
				{"admin key created and revoked fleet-wide", adminRevoke},
				{"idempotent duplicates coalesced across ingress replicas", duplicatesAcrossIngress},
				{"provider queues on their own slots", providerQueuesSpread},
			} {
				t.Run(tc.name, func(t *testing.T) {
					if err := c.Flush(); err != nil {
						t.Fatal(err)
					}
					tc.f(t, clusterAt(c))
				})
			}
		})
	}
}

// A master of the cluster is killed under load (the one holding the
// budgeted tenant's ledger): nothing crashes or hangs, budgeted requests
// get 503 with Retry-After while its slots have no master, unbudgeted
// ones are served (rates fail open), and once its replica is promoted
// every replica serves both again without a restart.
func TestClusterFleetSurvivesFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node cluster")
	}
	c := redistest.StartCluster(t)
	fleet := startFleetAt(t, clusterAt(c), 3, failoverYAML())
	var master string
	r := underFailover(t, fleet, func() {
		master = c.MasterOf("{t:paid}")
		c.KillMaster(master) // returns once a replica serves its slots
	})
	t.Logf("master %s killed: replica promoted after %v, every gateway replica serving budgeted requests after %v; "+
		"%d answered 200, %d budgeted got 503 meanwhile", master, r.promoted, r.recovered, r.ok, r.unavailable)
}

// failoverYAML has a budgeted tenant (paid), an unbudgeted one with room
// to spare (free) and an admin key (ops, for /metrics).
func failoverYAML() string {
	return strings.Replace(pricedYAML(`auth:
  keys:
    paid: {tenant: paid, budget_usd: 1000}
    free: {tenant: free, rpm: 100000}
    ops: {tenant: ops, role: admin}
`), "  p: {type: mock, mock: {tokens: 10}}", "  p: {type: mock, mock: {tokens: 10}, rpm: 100000}", 1) +
		"performance: {probing_enabled: false}\n"
}

// failover is what underFailover saw: how long after the kill Redis had
// a primary again and every gateway replica served budgeted requests
// from it, and the answers meanwhile.
type failover struct {
	promoted, recovered time.Duration
	ok, unavailable     int64
}

// underFailover runs budgeted (paid) and unbudgeted (free) load over the
// fleet and calls kill, which kills a Redis primary and returns once
// another is serving. It then waits until every gateway replica serves
// budgeted requests from Redis again, without a restart, and checks what
// clients saw: each answer a 200 or, for the budgeted key, a 503
// overloaded with Retry-After; every replica reading the same ledger
// after.
func underFailover(t *testing.T, fleet []*gateway, kill func()) failover {
	t.Helper()
	for _, key := range []string{"paid", "free"} {
		if a, err := send(fleet[0].URL, chatBody, "x-api-key", key); err != nil || a.Status != 200 {
			t.Fatalf("%s before: %v %d %s", key, err, a.Status, a.Body)
		}
	}
	var ok, unavailable atomic.Int64
	var mu sync.Mutex
	var other []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"paid", "free"}[w%2]
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a, err := send(fleet[(w+i)%len(fleet)].URL, chatBody, "x-api-key", key)
				switch {
				case err == nil && a.Status == 200:
					ok.Add(1)
				case err == nil && a.Status == 503 && key == "paid" && a.Header.Get("Retry-After") != "" &&
					gjson.Get(a.Body, "error.code").String() == "overloaded":
					unavailable.Add(1)
				default:
					mu.Lock()
					other = append(other, fmt.Sprintf("%s: %v %d %s", key, err, a.Status, a.Body))
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	kill()
	promoted := time.Since(killed)
	// Every replica serves the budgeted tenant from Redis again.
	var recovered time.Duration
	for _, g := range fleet {
		deadline := time.Now().Add(20 * time.Second)
		for {
			a, err := send(g.URL, chatBody, "x-api-key", "paid")
			if err == nil && a.Status == 200 && redisUp(t, g) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a replica did not recover 20 s after the promotion: %v %d %s", err, a.Status, a.Body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		recovered = max(recovered, time.Since(killed))
	}
	close(stop)
	wg.Wait()
	for _, o := range other[:min(len(other), 5)] {
		t.Errorf("an answer outside fail-open/fail-closed: %s", o)
	}
	if ok.Load() == 0 {
		t.Fatal("nothing was served")
	}
	// The spend ledger is whole on the new primary: every replica reads
	// the same settled total.
	var settled []int64
	for _, g := range fleet {
		u := g.get("/v1/usage", "x-api-key", "paid")
		if u.Status != 200 {
			t.Fatalf("usage after the failover: %d %s", u.Status, u.Body)
		}
		settled = append(settled, gjson.Get(u.Body, "spend.settled_nano_usd").Int())
	}
	for _, v := range settled[1:] {
		if v != settled[0] {
			t.Fatalf("replicas read different ledgers: %v", settled)
		}
	}
	return failover{promoted: promoted.Round(time.Millisecond), recovered: recovered.Round(time.Millisecond),
		ok: ok.Load(), unavailable: unavailable.Load()}
}
