package server

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/admit"
	"switchboard/internal/config"
	"switchboard/internal/front"
	"switchboard/internal/store/redistest"
)

// Fleet tests: three gateway replicas, each a Server with its own Redis
// store (its own connection pool) behind a real HTTP listener, sharing one
// real redis-server started for the test.

// startFleet serves yaml on n replicas sharing srv.
func startFleet(t *testing.T, srv *redistest.Server, n int, yaml string) []*gateway {
	t.Helper()
	return startFleetAt(t, singleAt(srv), n, yaml)
}

// startFleetAt serves yaml on n replicas sharing the Redis at.
func startFleetAt(t *testing.T, at redisAt, n int, yaml string) []*gateway {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "fleet.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	out := make([]*gateway, n)
	for i := range out {
		logs, log := replicaLog(i)
		// A long command timeout: these tests are about what is shared, and
		// on a loaded 2-core machine a 500 ms timeout sends a replica to
		// its in-process fallback (rates fail open) and admits too much.
		// A killed Redis still refuses at once.
		st := at.store(t, log)
		s := New(log, nil, nil)
		s.Admission = admit.New(st, s.Clock, s.Metrics.Registry)
		s.JoinFleet(st)
		s.Apply(cfg)
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(ts.Close)
		out[i] = &gateway{Server: s, URL: ts.URL, logs: logs, t: t}
	}
	return out
}

// replicaLog is replica i's log: kept for the test to read, and on
// stderr with -v.
func replicaLog(i int) (*syncBuffer, *slog.Logger) {
	logs := &syncBuffer{ch: make(chan struct{}, 1)}
	var w io.Writer = logs
	if testing.Verbose() {
		w = io.MultiWriter(logs, os.Stderr)
	}
	return logs, slog.New(front.LogHandler{Handler: slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})}).With("replica", i+1)
}

// fleetClient is shared by the load goroutines: enough idle connections
// per replica that 300 concurrent requests do not queue on dials.
var fleetClient = &http.Client{Timeout: 20 * time.Second,
	Transport: &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 400}}

// send posts without t: it runs on load goroutines.
func send(url, body string, headers ...string) (answer, error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := fleetClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}, err
}

// The provider's rpm: 50 means 50 for the fleet, not 50 per replica.
func TestFleetProviderBucketIsShared(t *testing.T) {
	providerBucketShared(t, singleAt(redistest.Start(t)))
}

func providerBucketShared(t *testing.T, at redisAt) {
	yaml := strings.Replace(mockYAML("m", "a"), "    mock: {tokens: 5}\n", "    mock: {tokens: 5}\n    rpm: 50\n", 1) +
		"performance: {probing_enabled: false}\n"
	fleet := startFleetAt(t, at, 3, yaml)
	// The bucket refills one request per 1.2 s, so the burst must be
	// quicker than that: open the connections beforehand.
	var warm sync.WaitGroup
	for i := range 300 {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if resp, err := fleetClient.Get(fleet[i%3].URL + "/health"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	warm.Wait()
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			a, err := send(fleet[i%3].URL, chatBody)
			switch {
			case err != nil:
				t.Errorf("request %d: %v", i, err)
			case a.Status == 200:
				ok.Add(1)
			case a.Status == 429 && a.Header.Get("Retry-After") != "" && gjson.Get(a.Body, "error.code").String() == "rate_limit_exceeded":
				limited.Add(1)
			default:
				t.Errorf("unexpected %d %s", a.Status, a.Body)
			}
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	took := time.Since(start)
	var hits int64
	for _, g := range fleet {
		hits += g.mock("a").Calls()
	}
	// A burst slowed past 1.2 s (a loaded machine) lets the bucket refill
	// one request per 1.2 s of it; a bucket per replica would admit 150.
	refills := int64(took / (1200 * time.Millisecond))
	if ok.Load() < 50 || ok.Load() > 50+refills || ok.Load()+limited.Load() != 300 || hits != ok.Load() {
		t.Fatalf("admitted %d, limited %d, upstream hits %d in %v; want 50 (+%d refilled), the rest limited, hits = admitted",
			ok.Load(), limited.Load(), hits, took, refills)
	}
	t.Logf("300 requests over 3 replicas in %v", took)
}

// A budget is one ledger for the fleet: concurrent requests on three
// replicas never reserve past it, and what is settled is exactly the
// reported usage at the configured price, to the nano-USD.
func TestFleetSpendCapHoldsToTheNano(t *testing.T) {
	spendCapHolds(t, singleAt(redistest.Start(t)))
}

func spendCapHolds(t *testing.T, at redisAt) {
	fleet := startFleetAt(t, at, 3, pricedYAML("auth:\n  keys:\n    k: {tenant: acme, budget_usd: 1}\n"))
	body := `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	var ok, refused, tokens atomic.Int64
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range 150 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			a, err := send(fleet[i%3].URL, body, "x-api-key", "k")
			switch {
			case err != nil:
				t.Errorf("request %d: %v", i, err)
			case a.Status == 200:
				ok.Add(1)
				tokens.Add(gjson.Get(a.Body, "usage.prompt_tokens").Int() + gjson.Get(a.Body, "usage.completion_tokens").Int())
			case a.Status == 429 && gjson.Get(a.Body, "error.code").String() == "budget_exceeded" && a.Header.Get("Retry-After") != "",
				a.Status == 400 && gjson.Get(a.Body, "error.code").String() == "request_exceeds_budget":
				refused.Add(1) // used up, or less left than this request reserves
			default:
				t.Errorf("unexpected %d %s", a.Status, a.Body)
			}
		}()
	}
	close(gate)
	wg.Wait()
	var views []string
	for _, g := range fleet {
		u := g.get("/v1/usage", "x-api-key", "k")
		views = append(views, gjson.Get(u.Body, "spend").Raw)
	}
	u := gjson.Parse(views[0])
	budget, settled, reserved := u.Get("budget_nano_usd").Int(), u.Get("settled_nano_usd").Int(), u.Get("reserved_nano_usd").Int()
	// 1000 USD per million tokens is 1e6 nano-USD per token.
	if want := tokens.Load() * 1_000_000; settled != want || reserved != 0 {
		t.Fatalf("settled %d reserved %d, want %d and 0 (%d ok)", settled, reserved, want, ok.Load())
	}
	if budget != 1_000_000_000 || settled > budget || ok.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("budget %d settled %d ok %d refused %d", budget, settled, ok.Load(), refused.Load())
	}
	for i, v := range views[1:] {
		if gjson.Get(v, "settled_nano_usd").Int() != settled {
			t.Fatalf("replica %d sees %s, replica 1 %s", i+2, v, views[0])
		}
	}
}

// Failures seen on replica 1 open the provider's circuit on replicas 2 and
// 3, which then never send to it.
func TestFleetCircuitOpensEverywhere(t *testing.T) {
	srv := redistest.Start(t)
	yaml := `providers:
  bad: {type: mock, mock: {tokens: 5, fail_rate: 1, fail_status: 500}}
  good: {type: mock, mock: {tokens: 5}}
models:
  - name: m
    providers: [{provider: bad, primary: true}, {provider: good}]
retries: {max_attempts: 2, max_rounds: 1, backoff_base: 0.01, max_backoff: 0.05}
health: {breaker: {threshold: 2, cooldown: 60}}
performance: {probing_enabled: false}
`
	fleet := startFleet(t, srv, 3, yaml)
	if a := fleet[0].post("/v1/chat/completions", chatBody); a.Status != 200 || a.Header.Get("X-Switchboard-Provider") != "good" {
		t.Fatalf("replica 1: %d %v %s", a.Status, a.Header, a.Body)
	}
	if !fleet[0].Health.Status("bad").CircuitOpen || fleet[0].mock("bad").Calls() != 2 {
		t.Fatalf("replica 1: circuit %v after %d calls", fleet[0].Health.Status("bad").CircuitOpen, fleet[0].mock("bad").Calls())
	}
	for _, g := range fleet[1:] {
		waitFor(t, func() bool { return g.Health.Status("bad").CircuitOpen })
		if d := g.get("/v1/health/detail"); !strings.Contains(d.Body, `"circuit_open":true`) {
			t.Fatalf("/v1/health/detail does not show the fleet's open circuit: %s", d.Body)
		}
		for range 5 {
			if a := g.post("/v1/chat/completions", chatBody); a.Status != 200 || a.Header.Get("X-Switchboard-Provider") != "good" {
				t.Fatalf("%d %s", a.Status, a.Body)
			}
		}
		if calls := g.mock("bad").Calls(); calls != 0 {
			t.Fatalf("a replica sent %d requests to a provider whose circuit the fleet opened", calls)
		}
	}
}

// Killing redis-server under load: nothing crashes or hangs, budgeted
// requests get 503 with Retry-After, unbudgeted (rate-limited) traffic is
// decided in process, and once redis-server is back on the same port every
// replica uses it again without a restart.
func TestFleetSurvivesRedisLoss(t *testing.T) {
	srv := redistest.Start(t)
	yaml := strings.Replace(pricedYAML(`auth:
  keys:
    paid: {tenant: paid, budget_usd: 1000}
    free: {tenant: free, rpm: 100000}
    ops: {tenant: ops, role: admin}
`), "  p: {type: mock, mock: {tokens: 10}}", "  p: {type: mock, mock: {tokens: 10}, rpm: 100000}", 1) +
		"performance: {probing_enabled: false}\n"
	fleet := startFleet(t, srv, 3, yaml)

	type tally struct {
		mu                     sync.Mutex
		ok, unavailable, other map[string]int
		slowest                time.Duration
		samples                []string
	}
	tl := &tally{ok: map[string]int{}, unavailable: map[string]int{}, other: map[string]int{}}
	var phase atomic.Value // "before", "down", "after"
	phase.Store("before")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "free"
			if w%2 == 0 {
				key = "paid"
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := phase.Load().(string)
				start := time.Now()
				a, err := send(fleet[(w+i)%3].URL, chatBody, "x-api-key", key)
				took := time.Since(start)
				tl.mu.Lock()
				tl.slowest = max(tl.slowest, took)
				k := p + "/" + key
				switch {
				case err != nil:
					tl.other[k]++
					tl.samples = append(tl.samples, err.Error())
				case a.Status == 200:
					tl.ok[k]++
				case a.Status == 503 && a.Header.Get("Retry-After") != "" && gjson.Get(a.Body, "error.code").String() == "overloaded":
					tl.unavailable[k]++
				default:
					tl.other[k]++
					tl.samples = append(tl.samples, fmt.Sprintf("%d %s", a.Status, a.Body))
				}
				tl.mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	srv.Kill()
	phase.Store("down")
	time.Sleep(time.Second)
	// Every replica noticed, each with one warning, and says so in metrics.
	for i, g := range fleet {
		if n := strings.Count(g.logs.String(), "redis is unavailable"); n != 1 {
			t.Errorf("replica %d logged %d warnings, want 1", i+1, n)
		}
		if up := redisUp(t, g); up != 0 {
			t.Errorf("replica %d: switchboard_redis_up %v during the outage", i+1, up)
		}
	}
	srv.Restart()
	phase.Store("restarted")
	// Recovery without restarting the replicas: budgeted requests are
	// admitted again on every one of them.
	for _, g := range fleet {
		waitFor(t, func() bool {
			a, err := send(g.URL, chatBody, "x-api-key", "paid")
			return err == nil && a.Status == 200
		})
	}
	for _, g := range fleet {
		waitFor(t, func() bool { return redisUp(t, g) == 1 })
	}
	phase.Store("after")
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()

	tl.mu.Lock()
	defer tl.mu.Unlock()
	t.Logf("ok %v, 503 %v, other %v, slowest %v", tl.ok, tl.unavailable, tl.other, tl.slowest)
	for k, n := range tl.other {
		// The moment of the kill may cut a request that was in flight on a
		// Redis command; nothing else may fail.
		if n > 0 && k != "down/paid" && k != "before/paid" {
			t.Errorf("%d unexpected answers in %s: %v", n, k, tl.samples)
		}
	}
	if tl.ok["before/paid"] == 0 || tl.ok["before/free"] == 0 {
		t.Error("no traffic before the outage")
	}
	if tl.unavailable["down/paid"] == 0 || tl.ok["down/paid"] > 12 {
		t.Errorf("budgeted requests during the outage: %d refused, %d admitted", tl.unavailable["down/paid"], tl.ok["down/paid"])
	}
	if tl.ok["down/free"] == 0 || tl.unavailable["down/free"] > 0 {
		t.Errorf("unbudgeted requests during the outage: %d served, %d refused", tl.ok["down/free"], tl.unavailable["down/free"])
	}
	if tl.ok["after/paid"] == 0 || tl.unavailable["after/paid"] > 0 || tl.unavailable["after/free"] > 0 {
		t.Errorf("after recovery: ok %v, 503 %v", tl.ok, tl.unavailable)
	}
	if tl.slowest > 5*time.Second {
		t.Errorf("a request took %v", tl.slowest)
	}
	for i, g := range fleet {
		if !strings.Contains(g.logs.String(), "redis answers again") {
			t.Errorf("replica %d never logged recovery", i+1)
		}
	}
}

// redisUp reads switchboard_redis_up from a replica's /metrics.
func redisUp(t *testing.T, g *gateway) float64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer ops") // with auth on, metrics need an admin key
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "switchboard_redis_up "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	t.Fatalf("no switchboard_redis_up in /metrics")
	return -1
}
