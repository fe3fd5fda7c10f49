package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/admit"
	"switchboard/internal/cache"
	"switchboard/internal/config"
	"switchboard/internal/front"
	"switchboard/internal/queue"
	"switchboard/internal/store"
	"switchboard/internal/store/redistest"
	"switchboard/internal/tenant"
	"switchboard/internal/usagelog"
)

// Response cache tests: through the real server, on each store (memory,
// a SQLite file, a real redis-server), with the usage log on.

// cacheYAML caches model m (one mock provider "a", priced) for tenants
// acme and other.
const cacheYAML = `providers:
  a: {type: mock, mock: {tokens: 5}}
models:
  - name: m
    providers: [{provider: a, model: a-model}]
pricing:
  a: {a-model: {input: 3, output: 15, context: 10000, max_output: 100}}
auth:
  keys:
    sk-acme: {tenant: acme}
    sk-acme-2: {tenant: acme}
    sk-other: {tenant: other}
performance: {probing_enabled: false}
# A long store deadline: under -race on a loaded machine a SQLite write
# takes longer than the default 100 ms (TestCacheStoreDownIsAMiss is about
# slow stores).
cache: {enabled: true, timeout: 10s}
`

// cacheStore opens the cache store kind ("memory", "sqlite", "redis"; rs
// for redis) and its index.
func cacheStore(t *testing.T, kind string, rs *redistest.Server) (cache.Store, cache.Index) {
	t.Helper()
	switch kind {
	case "sqlite":
		st, err := cache.OpenSQLite(filepath.Join(t.TempDir(), cache.DefaultFile), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, cache.NewMemoryIndex(1000, nil)
	case "redis":
		// A long command timeout, as in the fleet tests: these tests are
		// about what is stored and shared, and on a loaded machine a short
		// one turns puts into misses (TestCacheStoreDownIsAMiss is about
		// those).
		c, err := queue.Dial(rs.URL, 10*time.Second, time.Second, 16)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return cache.NewRedis(c), cache.NewRedisIndex(c, 1000)
	}
	return cache.NewMemory(nil), cache.NewMemoryIndex(1000, nil)
}

// cacheGateway serves yaml with a cache on st (nil: the server's default)
// and a usage log; adm is the admission store (nil: memory).
func cacheGateway(t *testing.T, yaml string, st cache.Store, idx cache.Index, adm store.Store) (*gateway, *usagelog.Log) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	db, err := usagelog.Open(filepath.Join(t.TempDir(), usagelog.DefaultFile))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{ch: make(chan struct{}, 1)}
	s := New(slog.New(front.LogHandler{Handler: slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})}), nil, nil)
	ul := usagelog.NewLog(db, usagelog.Options{Registerer: s.Metrics.Registry})
	s.SetUsageLog(ul)
	if adm != nil {
		s.Admission = admit.New(adm, s.Clock, s.Metrics.Registry)
	}
	if st != nil {
		s.SetCache(cache.New(cache.Options{Store: st, Index: idx, Clock: s.Clock, Log: s.Log, Registerer: s.Metrics.Registry,
			Timeout: 10 * time.Second}))
	}
	s.Apply(cfg)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		ul.Close()
		db.Close()
	})
	return &gateway{Server: s, URL: ts.URL, logs: logs, t: t}, ul
}

// waitStored waits until g's cache stored n answers in all: a unary
// answer reaches its client before it is stored.
func waitStored(t *testing.T, g *gateway, n int) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if storedCount(t, g) >= n {
			return
		}
	}
	var outcomes []string
	mfs, _ := g.Metrics.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "switchboard_cache_stores_total" || mf.GetName() == "switchboard_cache_errors_total" {
			for _, m := range mf.GetMetric() {
				outcomes = append(outcomes, fmt.Sprintf("%s%v=%v", mf.GetName(), m.GetLabel(), m.GetCounter().GetValue()))
			}
		}
	}
	t.Fatalf("%d answers stored, want %d; %v\n%s", storedCount(t, g), n, outcomes, g.logs.String())
}

func storedCount(t *testing.T, g *gateway) int {
	mfs, err := g.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "switchboard_cache_stores_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == "stored" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}

// cacheCases are one request per protocol, unary and stream.
var cacheCases = []struct{ name, path, body string }{
	{"chat", "/v1/chat/completions", `{"model":"m","temperature":0,"messages":[{"role":"user","content":"hi"}]}`},
	{"chat stream", "/v1/chat/completions", `{"model":"m","temperature":0,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{"completions", "/v1/completions", `{"model":"m","temperature":0,"prompt":"hi"}`},
	{"responses", "/v1/responses", `{"model":"m","temperature":0,"input":"hi"}`},
	{"responses stream", "/v1/responses", `{"model":"m","temperature":0,"stream":true,"input":"hi"}`},
	{"messages", "/v1/messages", `{"model":"m","temperature":0,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`},
	{"messages stream", "/v1/messages", `{"model":"m","temperature":0,"max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{"embeddings", "/v1/embeddings", `{"model":"m","input":"hi"}`},
}

// A repeat of each protocol's request, unary and streamed, is answered
// from the cache on every store: the same bytes, marked hit with an Age,
// no provider call, a usage row with cache_hit, cost 0 and saved_usd.
func TestCacheHitAndMissEveryProtocol(t *testing.T) {
	for _, kind := range []string{"memory", "sqlite", "redis"} {
		t.Run(kind, func(t *testing.T) {
			var rs *redistest.Server
			if kind == "redis" {
				rs = redistest.Start(t)
			}
			st, idx := cacheStore(t, kind, rs)
			g, ul := cacheGateway(t, cacheYAML, st, idx, nil)
			for i, tc := range cacheCases {
				before := g.mock("a").Calls()
				first := g.post(tc.path, tc.body, "Authorization", "Bearer sk-acme")
				if first.Status != 200 || first.Header.Get("X-Switchboard-Cache") != "miss" || first.Header.Get("Age") != "" {
					t.Fatalf("%s first: %d %v %s", tc.name, first.Status, first.Header, first.Body)
				}
				waitStored(t, g, i+1)
				again := g.post(tc.path, tc.body, "Authorization", "Bearer sk-acme")
				if again.Status != 200 || again.Header.Get("X-Switchboard-Cache") != "hit" || again.Body != first.Body {
					t.Fatalf("%s again: %d %v\n%q\nfirst:\n%q", tc.name, again.Status, again.Header, again.Body, first.Body)
				}
				if age, err := strconv.Atoi(again.Header.Get("Age")); err != nil || age < 0 || age > 60 {
					t.Fatalf("%s: Age %q", tc.name, again.Header.Get("Age"))
				}
				if again.Header.Get("Content-Type") != first.Header.Get("Content-Type") ||
					again.Header.Get("X-Switchboard-Provider") != "a" || again.Header.Get("X-Request-Id") == first.Header.Get("X-Request-Id") {
					t.Fatalf("%s headers: %v vs %v", tc.name, again.Header, first.Header)
				}
				if n := g.mock("a").Calls() - before; n != 1 {
					t.Fatalf("%s: %d provider calls for a miss and a hit", tc.name, n)
				}
			}
			n := int64(2 * len(cacheCases))
			waitRows(t, ul, n)
			rows, _, err := ul.DB().List(context.Background(), usagelog.Filter{}, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			hits := 0
			for _, r := range rows {
				switch {
				case r.CacheHit:
					hits++
					if r.CostNano != 0 || r.Attempts != 0 || r.SavedNano <= 0 || r.Provider != "a" || r.ProviderModel != "a-model" || r.Status != 200 {
						t.Fatalf("hit row %+v", r)
					}
				case r.CostNano <= 0 || r.Attempts != 1:
					t.Fatalf("miss row %+v", r)
				}
			}
			if hits != len(cacheCases) {
				t.Fatalf("%d hit rows", hits)
			}
			sums, err := ul.DB().Summarize(context.Background(), usagelog.Filter{}, nil)
			if err != nil || sums[0].SavedNano != sums[0].CostNano {
				t.Fatalf("saved %d, spent %d (%v): each hit saves what its miss cost", sums[0].SavedNano, sums[0].CostNano, err)
			}
		})
	}
}

// A tenant never gets another tenant's answer, unless the operator set
// scope: global; keys of one tenant share.
func TestCacheTenantIsolation(t *testing.T) {
	body := cacheCases[0].body
	g, _ := cacheGateway(t, cacheYAML, nil, nil, nil)
	g.post("/v1/chat/completions", body, "Authorization", "Bearer sk-acme")
	waitStored(t, g, 1)
	if a := g.post("/v1/chat/completions", body, "Authorization", "Bearer sk-other"); a.Header.Get("X-Switchboard-Cache") != "miss" {
		t.Fatalf("another tenant: %v", a.Header)
	}
	if a := g.post("/v1/chat/completions", body, "Authorization", "Bearer sk-acme-2"); a.Header.Get("X-Switchboard-Cache") != "hit" {
		t.Fatalf("another key of the tenant: %v", a.Header)
	}
	global, _ := cacheGateway(t, strings.Replace(cacheYAML, "cache: {enabled: true, timeout: 10s}", "cache: {enabled: true, timeout: 10s, scope: global}", 1), nil, nil, nil)
	global.post("/v1/chat/completions", body, "Authorization", "Bearer sk-acme")
	waitStored(t, global, 1)
	if a := global.post("/v1/chat/completions", body, "Authorization", "Bearer sk-other"); a.Header.Get("X-Switchboard-Cache") != "hit" {
		t.Fatalf("scope: global: %v", a.Header)
	}
}

// Cache-Control: no-cache skips the lookup but stores; no-store does
// neither; a sampled request bypasses unless the model says sampled: true.
func TestCacheOptOut(t *testing.T) {
	g, _ := cacheGateway(t, cacheYAML, nil, nil, nil)
	key := []string{"Authorization", "Bearer sk-acme"}
	post := func(body string, h ...string) answer {
		return g.post("/v1/chat/completions", body, append(append([]string{}, key...), h...)...)
	}
	q := func(s string) string {
		return `{"model":"m","temperature":0,"messages":[{"role":"user","content":"` + s + `"}]}`
	}
	stored := 0
	for _, tc := range []struct {
		name, body, cc, first, then string
		stores                      int
	}{
		{"no-cache stores", q("one"), "no-cache", "bypass", "hit", 1},
		// The miss after no-store stores the answer.
		{"no-store stores nothing", q("two"), "no-store", "bypass", "miss", 1},
		{"no-cache does not read", q("one"), "no-cache", "bypass", "hit", 1},
		{"sampled", `{"model":"m","messages":[{"role":"user","content":"three"}]}`, "", "bypass", "bypass", 0},
		{"hot sampled", `{"model":"m","temperature":0.9,"messages":[{"role":"user","content":"four"}]}`, "", "bypass", "bypass", 0},
	} {
		before := g.mock("a").Calls()
		var h []string
		if tc.cc != "" {
			h = []string{"Cache-Control", tc.cc}
		}
		if a := post(tc.body, h...); a.Status != 200 || a.Header.Get("X-Switchboard-Cache") != tc.first {
			t.Fatalf("%s: %d %v", tc.name, a.Status, a.Header)
		}
		if g.mock("a").Calls() != before+1 {
			t.Fatalf("%s: the provider was not called", tc.name)
		}
		if tc.then == "hit" {
			waitStored(t, g, stored+tc.stores)
		}
		if a := post(tc.body); a.Header.Get("X-Switchboard-Cache") != tc.then {
			t.Fatalf("%s then: %v", tc.name, a.Header)
		}
		stored += tc.stores
		waitStored(t, g, stored)
	}
	sampled, _ := cacheGateway(t, strings.Replace(cacheYAML, "    providers: [{provider: a, model: a-model}]",
		"    cache: {sampled: true}\n    providers: [{provider: a, model: a-model}]", 1), nil, nil, nil)
	body := `{"model":"m","messages":[{"role":"user","content":"roll"}]}`
	sampled.post("/v1/chat/completions", body, key...)
	waitStored(t, sampled, 1)
	if a := sampled.post("/v1/chat/completions", body, key...); a.Header.Get("X-Switchboard-Cache") != "hit" {
		t.Fatalf("sampled: true: %v", a.Header)
	}
}

// A hit takes no provider admission and no spend, but counts in the
// tenant's rpm: over it, a hit gets the same 429.
func TestCacheHitCountsInRPM(t *testing.T) {
	yaml := strings.Replace(cacheYAML, "sk-acme: {tenant: acme}", "sk-acme: {tenant: acme, rpm: 3, budget_usd: 1}", 1)
	yaml = strings.Replace(yaml, "sk-acme-2: {tenant: acme}", "sk-acme-2: {tenant: acme, rpm: 3, budget_usd: 1}", 1)
	g, ul := cacheGateway(t, yaml, nil, nil, nil)
	body := cacheCases[0].body
	for i, want := range []string{"miss", "hit", "hit"} {
		if a := g.post("/v1/chat/completions", body, "Authorization", "Bearer sk-acme"); a.Status != 200 || a.Header.Get("X-Switchboard-Cache") != want {
			t.Fatalf("request %d: %d %v", i+1, a.Status, a.Header)
		}
		waitStored(t, g, 1)
	}
	a := g.post("/v1/chat/completions", body, "Authorization", "Bearer sk-acme")
	if a.Status != 429 || !strings.Contains(a.Body, "rate_limit_exceeded") || a.Header.Get("Retry-After") == "" || a.Header.Get("X-Switchboard-Cache") != "" {
		t.Fatalf("fourth request (a hit over the rpm): %d %s", a.Status, a.Body)
	}
	if g.mock("a").Calls() != 1 {
		t.Fatalf("%d provider calls", g.mock("a").Calls())
	}
	id, _ := g.Admission.Authenticate("sk-acme")
	u, err := g.Admission.Usage(context.Background(), id, admit.UsageOptions{})
	if err != nil || u.RequestsToday != 1 {
		t.Fatalf("attempts today %d (%v): hits are not provider attempts", u.RequestsToday, err)
	}
	waitRows(t, ul, 4)
	sums, _ := ul.DB().Summarize(context.Background(), usagelog.Filter{}, nil)
	if sums[0].CacheHits != 2 || sums[0].SavedNano != 2*sums[0].CostNano {
		t.Fatalf("sums %+v", sums[0])
	}
	if got := spentNano(t, g, id); got != sums[0].CostNano {
		t.Fatalf("the ledger holds %d nano-USD; the one miss cost %d", got, sums[0].CostNano)
	}
}

// spentNano reads the tenant's settled spend in its window.
func spentNano(t *testing.T, g *gateway, id *tenant.Identity) int64 {
	t.Helper()
	u, err := g.Admission.Usage(context.Background(), id, admit.UsageOptions{})
	if err != nil || u.Spend == nil {
		t.Fatalf("usage %+v %v", u, err)
	}
	return u.Spend.SettledNano + u.Spend.ReservedNano
}

// Only complete, successful answers are stored: not a cut stream, not an
// upstream error, not an answer cut by max_tokens.
func TestCacheStoresOnlyCompleteAnswers(t *testing.T) {
	yaml := strings.Replace(cacheYAML, "a: {type: mock, mock: {tokens: 5}}",
		"a: {type: mock, mock: {tokens: 5}}\n  cutter: {type: mock, mock: {tokens: 9, cut_after_chunks: 3}}\n  broken: {type: mock, mock: {fail_rate: 1, fail_status: 500}}", 1)
	yaml = strings.Replace(yaml, "models:\n", `models:
  - name: cut
    providers: [{provider: cutter}]
  - name: down
    providers: [{provider: broken}]
`, 1)
	yaml = strings.Replace(yaml, "performance:", "retries: {max_attempts: 1, max_rounds: 1}\nperformance:", 1)
	g, _ := cacheGateway(t, yaml, nil, nil, nil)
	key := []string{"Authorization", "Bearer sk-acme"}
	for _, tc := range []struct{ name, body string }{
		{"cut stream", `{"model":"cut","temperature":0,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"upstream error", `{"model":"down","temperature":0,"messages":[{"role":"user","content":"hi"}]}`},
		{"max_tokens", `{"model":"m","temperature":0,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`},
		{"max_tokens stream", `{"model":"m","temperature":0,"max_tokens":2,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		g.post("/v1/chat/completions", tc.body, key...)
		if a := g.post("/v1/chat/completions", tc.body, key...); a.Header.Get("X-Switchboard-Cache") != "miss" {
			t.Fatalf("%s was stored: %d %v %s", tc.name, a.Status, a.Header, a.Body)
		}
	}
}

// A flood of distinct requests keeps the memory store within
// cache.max_bytes.
func TestCacheFloodStaysBounded(t *testing.T) {
	yaml := strings.Replace(cacheYAML, "cache: {enabled: true, timeout: 10s}", "cache: {enabled: true, timeout: 10s, max_bytes: 1048576}", 1)
	st := cache.NewMemory(nil)
	g, _ := cacheGateway(t, yaml, st, nil, nil)
	pad := strings.Repeat("p", 2000)
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := range 150 {
				body := fmt.Sprintf(`{"model":"m","temperature":0,"messages":[{"role":"user","content":"%d-%d %s"}]}`, w, i, pad)
				a, err := send(g.URL, body, "Authorization", "Bearer sk-acme")
				if err == nil && a.Status != 200 {
					err = fmt.Errorf("status %d", a.Status)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if st.Bytes() > 1<<20 || st.Bytes() < 1<<19 || st.Len() >= 1200 {
		t.Fatalf("the store holds %d bytes in %d entries after 1200 distinct answers", st.Bytes(), st.Len())
	}
}

// Two replicas share one cache through Redis: a question answered on one
// is a hit on the other, which calls no provider.
func TestCacheFleetSharesHits(t *testing.T) {
	rs := redistest.Start(t)
	var gs []*gateway
	for range 2 {
		st, idx := cacheStore(t, "redis", rs)
		adm, err := store.OpenRedis(store.RedisOptions{URL: rs.URL, CommandTimeout: 10 * time.Second, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { adm.Close() })
		g, _ := cacheGateway(t, cacheYAML, st, idx, adm)
		gs = append(gs, g)
	}
	for i, tc := range cacheCases {
		first := gs[0].post(tc.path, tc.body, "Authorization", "Bearer sk-acme")
		waitStored(t, gs[0], i+1)
		before := gs[1].mock("a").Calls()
		other := gs[1].post(tc.path, tc.body, "Authorization", "Bearer sk-acme")
		if first.Header.Get("X-Switchboard-Cache") != "miss" || other.Header.Get("X-Switchboard-Cache") != "hit" || other.Body != first.Body {
			t.Fatalf("%s: %v / %v", tc.name, first.Header, other.Header)
		}
		if gs[1].mock("a").Calls() != before {
			t.Fatalf("%s: the second replica called its provider", tc.name)
		}
	}
}

// A cache store that is down makes every request a miss, served as if
// there were no cache.
func TestCacheStoreDownIsAMiss(t *testing.T) {
	rs := redistest.Start(t)
	c, err := queue.Dial(rs.URL, 100*time.Millisecond, 100*time.Millisecond, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	g, _ := cacheGateway(t, cacheYAML, cache.NewRedis(c), cache.NewRedisIndex(c, 10), nil)
	rs.Kill()
	for _, tc := range cacheCases {
		start := time.Now()
		a := g.post(tc.path, tc.body, "Authorization", "Bearer sk-acme")
		if a.Status != 200 || a.Header.Get("X-Switchboard-Cache") != "miss" || time.Since(start) > 5*time.Second {
			t.Fatalf("%s with the store down: %d %v after %v", tc.name, a.Status, a.Header, time.Since(start))
		}
	}
	if !strings.Contains(g.logs.String(), "response cache unavailable") {
		t.Fatal("the outage was not logged")
	}
}

// A model without a cache answers as before: no header, no lookup.
func TestCacheOffByDefault(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	if a := g.post("/v1/chat/completions", cacheCases[0].body); a.Status != 200 || a.Header.Get("X-Switchboard-Cache") != "" {
		t.Fatalf("%d %v", a.Status, a.Header)
	}
	if g.Cache() != nil {
		t.Fatal("a cache was made for a config that caches nothing")
	}
}

// embeddingUpstream is an OpenAI-compatible embeddings provider whose
// vectors are chosen per text, and counts its calls.
func embeddingUpstream(t *testing.T, vectors map[string]string) (string, *atomic.Int64) {
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		v, ok := vectors[gjson.GetBytes(b, "input").String()]
		if !ok || r.URL.Path != "/v1/embeddings" {
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":{"message":"unknown input","type":"invalid_request_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","model":"emb-1","data":[{"object":"embedding","index":0,"embedding":`+v+`}],"usage":{"prompt_tokens":1000,"total_tokens":1000}}`)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/v1", &calls
}

// The semantic cache answers a differently worded question with the
// stored answer of a near one, within the same model, parameters and
// tenant; the embedding call is routed, admitted and billed to the caller.
func TestCacheSemantic(t *testing.T) {
	url, calls := embeddingUpstream(t, map[string]string{
		"what is the capital of France": "[1, 0, 0]",
		"capital of France?":            "[0.99, 0.1, 0]",
		"capital of Australia?":         "[0.5, 0.86, 0]",
	})
	yaml := strings.Replace(cacheYAML, "providers:\n", "providers:\n  embedder: {base_url: "+url+", api_key: k}\n", 1)
	yaml = strings.Replace(yaml, "models:\n", "models:\n  - name: emb\n    providers: [{provider: embedder, model: emb-1}]\n", 1)
	yaml = strings.Replace(yaml, "pricing:\n", "pricing:\n  embedder: {emb-1: {input: 0.1, output: 0, context: 10000, max_output: 1}}\n", 1)
	yaml = strings.Replace(yaml, "{tenant: acme}", "{tenant: acme, rpm: 100, budget_usd: 1}", 2)
	yaml = strings.Replace(yaml, "cache: {enabled: true, timeout: 10s}", "cache: {enabled: true, timeout: 10s, semantic: {embedding_model: emb, threshold: 0.95}}", 1)
	g, ul := cacheGateway(t, yaml, nil, nil, nil)
	ask := func(q, key string) answer {
		return g.post("/v1/chat/completions", `{"model":"m","temperature":0,"messages":[{"role":"user","content":"`+q+`"}]}`,
			"Authorization", "Bearer "+key)
	}
	first := ask("what is the capital of France", "sk-acme")
	waitStored(t, g, 1)
	near := ask("capital of France?", "sk-acme")
	if first.Header.Get("X-Switchboard-Cache") != "miss" || near.Header.Get("X-Switchboard-Cache") != "hit" || near.Body != first.Body {
		t.Fatalf("near question: %v / %v\n%s", first.Header, near.Header, g.logs.String())
	}
	if a := ask("capital of Australia?", "sk-acme"); a.Header.Get("X-Switchboard-Cache") != "miss" {
		t.Fatalf("a question below the threshold: %v", a.Header)
	}
	if a := ask("capital of France?", "sk-other"); a.Header.Get("X-Switchboard-Cache") != "miss" {
		t.Fatalf("another tenant: %v", a.Header)
	}
	if g.mock("a").Calls() != 3 || calls.Load() != 4 {
		t.Fatalf("%d chat calls, %d embedding calls", g.mock("a").Calls(), calls.Load())
	}
	waitRows(t, ul, 4)
	rows, _, _ := ul.DB().List(context.Background(), usagelog.Filter{Tenant: "acme"}, 0, 10)
	var hit *usagelog.Row
	for i := range rows {
		if rows[i].CacheHit {
			hit = &rows[i]
		}
	}
	// The hit's row: the embedding attempt and its cost (100 µUSD), and
	// what the stored answer saved.
	if hit == nil || hit.Attempts != 1 || hit.CostNano != 100_000 || hit.SavedNano <= 0 {
		t.Fatalf("semantic hit row: %+v", hit)
	}
}

// The semantic cache's embedding call is one request of the caller's:
// under limits.tenant_counting: request its retries count once in the
// tenant's rpm, as a client request's do. With rpm 4, a miss (embedding
// retried on a second provider, then the answer) and a semantic hit
// (embedding, then the hit) fit; counted per attempt they would not.
func TestCacheSemanticEmbeddingCountsOnce(t *testing.T) {
	url, _ := embeddingUpstream(t, map[string]string{
		"what is the capital of France": "[1, 0, 0]",
		"capital of France?":            "[0.99, 0.1, 0]",
	})
	yaml := strings.Replace(cacheYAML, "providers:\n", "providers:\n  down: {type: mock, mock: {fail_rate: 1}}\n  embedder: {base_url: "+url+", api_key: k}\n", 1)
	yaml = strings.Replace(yaml, "models:\n", "models:\n  - name: emb\n    providers: [{provider: down, model: emb-0}, {provider: embedder, model: emb-1}]\n", 1)
	yaml = strings.Replace(yaml, "{tenant: acme}", "{tenant: acme, rpm: 4}", 2) + "retries: {max_attempts: 1}\n"
	yaml = strings.Replace(yaml, "cache: {enabled: true, timeout: 10s}", "cache: {enabled: true, timeout: 10s, semantic: {embedding_model: emb, threshold: 0.95}}", 1)
	g, _ := cacheGateway(t, yaml, nil, nil, nil)
	ask := func(q string) answer {
		return g.post("/v1/chat/completions", `{"model":"m","temperature":0,"messages":[{"role":"user","content":"`+q+`"}]}`,
			"Authorization", "Bearer sk-acme")
	}
	first := ask("what is the capital of France")
	if first.Status != 200 || g.mock("down").Calls() == 0 {
		t.Fatalf("first: %d, %d calls to the failing embedder\n%s", first.Status, g.mock("down").Calls(), first.Body)
	}
	waitStored(t, g, 1)
	near := ask("capital of France?")
	if near.Status != 200 || near.Header.Get("X-Switchboard-Cache") != "hit" {
		t.Fatalf("near question: %d %v\n%s\n%s", near.Status, near.Header, near.Body, g.logs.String())
	}
	if g.mock("a").Calls() != 1 {
		t.Fatalf("%d chat calls", g.mock("a").Calls())
	}
}

// The admin page shows what the cache saved: the overview's totals and
// per tenant, drawn in Chromium; /metrics counts hits, misses, bytes and
// the saving.
func TestCacheSavingsOnAdmin(t *testing.T) {
	yaml := strings.Replace(cacheYAML, "    sk-other: {tenant: other}\n", "    sk-other: {tenant: other}\n    sk-admin: {tenant: ops, role: admin}\n", 1)
	g, ul := cacheGateway(t, yaml, nil, nil, nil)
	body := cacheCases[0].body
	for range 3 {
		g.post("/v1/chat/completions", body, "Authorization", "Bearer sk-acme")
		waitStored(t, g, 1)
	}
	waitRows(t, ul, 3)
	a := g.get("/admin/v1/overview", "Authorization", "Bearer sk-admin")
	acme := gjson.Get(a.Body, `tenants.#(tenant=="acme")`)
	saved := gjson.Get(a.Body, "cache.saved_nano_usd_24h").Int()
	if a.Status != 200 || gjson.Get(a.Body, "cache.hits_24h").Int() != 2 || saved <= 0 || saved != 2*acme.Get("cost_nano_usd_24h").Int() ||
		acme.Get("cache_hits_24h").Int() != 2 || acme.Get("saved_nano_usd_24h").Int() != saved {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	m := g.get("/metrics", "Authorization", "Bearer sk-admin").Body
	for _, want := range []string{`switchboard_cache_lookups_total{model="m",result="hit"} 2`, `switchboard_cache_lookups_total{model="m",result="miss"} 1`,
		`switchboard_cache_stores_total{model="m",outcome="stored"} 1`, fmt.Sprintf(`switchboard_cache_saved_nano_usd_total{model="m"} %d`, saved),
		`switchboard_cache_hit_bytes_total{model="m"}`, `switchboard_cache_bytes `} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	bin := chromiumBin(t)
	dom := chromiumDOM(t, bin, g.URL+"/admin#token=sk-admin")
	if !strings.Contains(dom, fmt.Sprintf(`data-cache-saved="%d"`, saved)) || !strings.Contains(dom, "2 answers replayed from the cache saved") ||
		!strings.Contains(dom, `data-saved="acme"`) {
		t.Fatalf("the admin page does not show the savings:\n%s", dom)
	}
}

// With the queue, the worker that runs a request looks it up and stores
// it; its verdict and the client's Cache-Control travel with the job.
func TestCacheQueued(t *testing.T) {
	rs := redistest.Start(t)
	yaml := strings.Replace(cacheYAML, "auth:\n  keys:\n    sk-acme: {tenant: acme}\n    sk-acme-2: {tenant: acme}\n    sk-other: {tenant: other}\n", "", 1)
	rp := startQueued(t, rs, yaml, "", ingressOnly, workerOnly)
	in, worker := rp[0], rp[1]
	for i, tc := range cacheCases[:2] {
		first := in.post(tc.path, tc.body)
		waitStored(t, worker.gateway, i+1)
		again := in.post(tc.path, tc.body)
		if first.Header.Get("X-Switchboard-Cache") != "miss" || again.Header.Get("X-Switchboard-Cache") != "hit" || again.Body != first.Body {
			t.Fatalf("%s: %v / %v", tc.name, first.Header, again.Header)
		}
		if a := in.post(tc.path, tc.body, "Cache-Control", "no-store"); a.Header.Get("X-Switchboard-Cache") != "bypass" {
			t.Fatalf("%s no-store: %v", tc.name, a.Header)
		}
	}
	if n := worker.mock("a").Calls(); n != 4 {
		t.Fatalf("the worker's provider served %d calls, want 4 (2 misses, 2 no-store)", n)
	}
}
