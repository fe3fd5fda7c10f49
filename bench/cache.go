package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The cache mode measures what a response-cache hit costs the client
// against the bare proxy. The fake upstream and the bare
// httputil.ReverseProxy run as in the main harness (children of this
// binary); the gateway runs with cache: {enabled: true} in memory. The
// same closed-loop load runs against three targets, unary and streamed:
//
//   - proxy: the bare proxy in front of the instant fake upstream, the
//     same request every time (what a round trip costs with no gateway);
//   - hit: the gateway, the same request every time (after one miss), so
//     every measured request is replayed from the cache;
//   - miss: the gateway, every request distinct, so every one goes to the
//     upstream and is recorded and stored.
//
// Latency is the client's: request sent to the last body byte read. The
// upstream answers at once, so the proxy's figure is pure proxy overhead;
// with a real provider (hundreds of ms to seconds) a hit saves all of that.
//
//	bench cache --gateway PATH [--requests 3000] [--concurrency 1,8] [--out DIR]

// CacheRun is one target's figures at one concurrency.
type CacheRun struct {
	Target      string  `json:"target"` // proxy, hit, miss
	Stream      bool    `json:"stream"`
	Concurrency int     `json:"concurrency"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	P50         float64 `json:"p50_ms"`
	P90         float64 `json:"p90_ms"`
	P99         float64 `json:"p99_ms"`
	RPS         float64 `json:"requests_per_s"`
	// Hits is how many answers the gateway marked X-Switchboard-Cache: hit.
	Hits int `json:"hits"`
}

// CacheReport is a cache mode run.
type CacheReport struct {
	Started time.Time  `json:"started"`
	Runs    []CacheRun `json:"runs"`
}

// CacheOptions configure Cache.
type CacheOptions struct {
	Gateway, Out string
	Self         []string
	Requests     int
	Concurrency  []int
	Progress     io.Writer
}

func cacheMain(args []string) int {
	fs := flag.NewFlagSet("cache", flag.ContinueOnError)
	o := CacheOptions{Progress: os.Stderr}
	fs.StringVar(&o.Gateway, "gateway", "", "switchboard binary to measure (required)")
	fs.StringVar(&o.Out, "out", "bench/results", "directory for cache-latest.json/.md and the process logs")
	fs.IntVar(&o.Requests, "requests", 3000, "measured requests per target, concurrency and kind")
	conc := fs.String("concurrency", "1,8", "closed-loop clients (comma-separated settings)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.Gateway == "" {
		logf("bench cache: --gateway is required")
		return 2
	}
	for _, c := range strings.Split(*conc, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(c), &n); err != nil || n < 1 || n > 1000 {
			logf("bench cache: bad --concurrency %q", c)
			return 2
		}
		o.Concurrency = append(o.Concurrency, n)
	}
	self, err := os.Executable()
	if err != nil {
		logf("bench cache: %v", err)
		return 1
	}
	o.Self = []string{self}
	rep, err := Cache(o)
	if err != nil {
		logf("bench cache: %v", err)
		return 1
	}
	fmt.Print(rep.Markdown())
	return 0
}

// cacheConfig is the main harness's gateway config with the cache on.
func cacheConfig(upURL, token string) string {
	return gatewayConfig(upURL, token) + "cache: {enabled: true}\n"
}

// Cache runs the cache mode.
func Cache(o CacheOptions) (*CacheReport, error) {
	gw, err := filepath.Abs(o.Gateway)
	if err != nil {
		return nil, err
	}
	h := &harness{o: Options{Self: o.Self}, logDir: filepath.Join(o.Out, "logs"), token: "sk-bench-0123456789abcdef"}
	if err := os.MkdirAll(h.logDir, 0o755); err != nil {
		return nil, err
	}
	defer h.stopEnv()
	if h.up, err = h.startChild("upstream", "--listen", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	upURL := "http://" + h.up.addr
	if h.base, err = h.startChild("baseline", "--listen", "127.0.0.1:0", "--upstream", upURL); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-cache")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(cacheConfig(upURL, h.token)), 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(h.logDir, "cache-gateway.log")
	cmd, addr, err := serveGateway(gw, cfg, dir, logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	rep := &CacheReport{Started: time.Now().UTC()}
	proxyURL, gwURL := "http://"+h.base.addr+"/v1/chat/completions", "http://"+addr+"/v1/chat/completions"
	var seq atomic.Int64
	for _, stream := range []bool{false, true} {
		for _, c := range o.Concurrency {
			for _, tg := range []struct {
				name string
				url  string
				body func() string
			}{
				{"proxy", proxyURL, func() string { return cacheBody(stream, "same question") }},
				{"hit", gwURL, func() string { return cacheBody(stream, "same question") }},
				{"miss", gwURL, func() string { return cacheBody(stream, fmt.Sprintf("question %d", seq.Add(1))) }},
			} {
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * c}, Timeout: 30 * time.Second}
				// Warm: connections, and the hit target's one miss.
				cacheLoad(client, tg.url, h.token, tg.body, 50, c)
				run := cacheLoad(client, tg.url, h.token, tg.body, o.Requests, c)
				client.CloseIdleConnections()
				run.Target, run.Stream, run.Concurrency = tg.name, stream, c
				if run.Errors > 0 {
					return nil, fmt.Errorf("%s (stream %v, %d clients): %d errors%s", tg.name, stream, c, run.Errors, tail(logPath))
				}
				rep.Runs = append(rep.Runs, *run)
				fmt.Fprintf(o.Progress, "cache %-5s stream=%-5v c=%-3d p50 %.3f ms p99 %.3f ms, %d hits\n",
					tg.name, stream, c, run.P50, run.P99, run.Hits)
			}
		}
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(o.Out, "cache-latest.json"), b, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "cache-latest.md"), []byte(rep.Markdown()), 0o644); err != nil {
		return nil, err
	}
	return rep, nil
}

// cacheBody is a deterministic (temperature 0) chat request.
func cacheBody(stream bool, q string) string {
	return fmt.Sprintf(`{"model":%q,"temperature":0,"stream":%v,"max_tokens":16,"messages":[{"role":"user","content":%q}]}`,
		benchModel, stream, q)
}

// cacheLoad sends n requests over c clients and measures each one from
// its send to its last byte.
func cacheLoad(client *http.Client, url, token string, body func() string, n, c int) *CacheRun {
	var next, errs, hits atomic.Int64
	var mu sync.Mutex
	lat := make([]time.Duration, 0, n)
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				d, hit, err := cacheOne(client, url, token, body())
				if err != nil {
					errs.Add(1)
					continue
				}
				if hit {
					hits.Add(1)
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		i := int(float64(len(lat))*p+0.999999) - 1
		return float64(lat[max(0, min(i, len(lat)-1))]) / float64(time.Millisecond)
	}
	return &CacheRun{Requests: n, Errors: int(errs.Load()), Hits: int(hits.Load()), P50: q(0.5), P90: q(0.9), P99: q(0.99),
		RPS: float64(len(lat)) / el.Seconds()}
}

func cacheOne(client *http.Client, url, token, body string) (time.Duration, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	d := time.Since(start)
	if err != nil {
		return 0, false, err
	}
	if resp.StatusCode != http.StatusOK || len(b) == 0 {
		return 0, false, fmt.Errorf("status %d", resp.StatusCode)
	}
	return d, resp.Header.Get("X-Switchboard-Cache") == "hit", nil
}

// Markdown renders the runs with the ratios to the bare proxy.
func (r *CacheReport) Markdown() string {
	var b strings.Builder
	b.WriteString("| kind | clients | target | p50 ms | p99 ms | req/s | p50 / proxy | p99 / proxy | hits |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range r.Runs {
		var proxy *CacheRun
		for i := range r.Runs {
			p := &r.Runs[i]
			if p.Target == "proxy" && p.Stream == run.Stream && p.Concurrency == run.Concurrency {
				proxy = p
			}
		}
		kind := "unary"
		if run.Stream {
			kind = "stream"
		}
		r50, r99 := "1", "1"
		if proxy != nil && run.Target != "proxy" {
			r50, r99 = fmt.Sprintf("%.2f", run.P50/max(proxy.P50, 1e-6)), fmt.Sprintf("%.2f", run.P99/max(proxy.P99, 1e-6))
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %.3f | %.3f | %.0f | %s | %s | %d/%d |\n", kind, run.Concurrency, run.Target,
			run.P50, run.P99, run.RPS, r50, r99, run.Hits, run.Requests)
	}
	return b.String()
}
