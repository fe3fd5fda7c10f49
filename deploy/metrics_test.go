package deploy

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"switchboard/internal/store/redistest"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// gatewayBinary builds cmd/switchboard once for the package's tests.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "switchboard-bin-")
		if err != nil {
			binErr = err
			return
		}
		atExit(func() { os.RemoveAll(dir) })
		binPath = filepath.Join(dir, "switchboard")
		// Built as the Dockerfile builds it (static, -trimpath): the test
		// runs what ships, and the image build later finds these compiled
		// packages in the Go cache it mounts.
		cmd := exec.Command("go", "build", "-trimpath", "-o", binPath, "./cmd/switchboard")
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// metricsConfig drives every series the dashboard and the alerts read:
// a provider answering 429 (quota pause, failure reason rate_limited), one
// answering 500 (server_error, circuit gauge), a steady one serving the
// stream (TTFT, TPS, spend), a budgeted tenant (spend, budget ratio), a
// tenant at 1 RPM (a refusal), a provider concurrency gate (slot wait),
// Redis (redis_up), the Redis queue (queue.mode: redis, role all: the
// queue gauges) and a hedged model whose first provider lags (hedges
// started and won, and the budgeted loser's waste).
const metricsConfig = `
providers:
  quota: {type: mock, mock: {fail_first: 1000, fail_status: 429, fail_headers: {Retry-After: "60"}}}
  broken: {type: mock, mock: {fail_first: 1000, fail_status: 500}}
  steady: {type: mock, max_concurrency: 8, mock: {ttft_ms: 20, tokens_per_second: 400, tokens: 20}}
  lagging: {type: mock, mock: {ttft_ms: 10000, tokens: 5}}
models:
  - name: m
    providers:
      - {provider: quota, model: q}
      - {provider: broken, model: b}
      - {provider: steady, model: s}
  - name: hedged
    hedge: {after: 50ms}
    providers:
      - {provider: lagging, model: l}
      - {provider: steady, model: s}
pricing:
  quota: {q: {input: 1, output: 2, context: 100000, max_output: 1000}}
  broken: {b: {input: 1, output: 2, context: 100000, max_output: 1000}}
  steady: {s: {input: 1, output: 2, context: 100000, max_output: 1000}}
  lagging: {l: {input: 1, output: 2, context: 100000, max_output: 1000}}
auth:
  metrics_token: scrape
  keys:
    sk-acme: {tenant: acme, budget_usd: 100}
    sk-small: {tenant: small, rpm: 1}
retries: {max_attempts: 1, max_rounds: 1, backoff_base: 0.01}
performance: {probing_enabled: false}
queue: {mode: redis}
`

// Every metric named in the dashboard's or the alerts' expressions exists
// on a running gateway's /metrics. The gateway is the real binary on a
// real Redis, and traffic is driven until every vector has a child: a
// vector without one is absent from the exposition, so each name is
// checked against what a scrape shows, never against a list.
func TestDashboardAndAlertMetricsExist(t *testing.T) {
	var exprs []string
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	for _, p := range readDashboard(t).Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	names := metricNames(exprs)
	if len(names) < 15 {
		t.Fatalf("only %d metric names found in the expressions: %v", len(names), names)
	}

	rd := redistest.Start(t)
	bin := gatewayBinary(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(metricsConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config", cfgPath, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	cmd.Env = append(os.Environ(), "STATE_DIR="+dir, "SWITCHBOARD_REDIS_URL="+rd.URL)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHealthy(t, base+"/health")

	post := func(key, body string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request: %v\nlogs:\n%s", err, tail(logs.String(), 3000))
		}
		defer resp.Body.Close()
		readAll(resp.Body)
		return resp.StatusCode
	}
	stream := `{"model":"m","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	unary := `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	if code := post("sk-acme", stream); code != 200 {
		t.Fatalf("budgeted stream: %d\nlogs:\n%s", code, tail(logs.String(), 3000))
	}
	post("sk-acme", unary)
	if code := post("sk-acme", strings.Replace(stream, `"m"`, `"hedged"`, 1)); code != 200 {
		t.Fatalf("hedged stream: %d\nlogs:\n%s", code, tail(logs.String(), 3000))
	}
	post("sk-small", unary)
	if code := post("sk-small", unary); code != 429 {
		t.Errorf("second request at 1 RPM: %d, want 429", code)
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer scrape")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, readAll(resp.Body))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bufio.NewReader(resp.Body))
	if err != nil {
		t.Fatalf("/metrics is not valid exposition: %v", err)
	}
	// Sample names as PromQL sees them: a histogram X shows as X_bucket,
	// X_sum and X_count.
	scraped := map[string]bool{}
	for name, f := range fams {
		if len(f.GetMetric()) == 0 {
			continue
		}
		scraped[name] = true
		if f.GetType().String() == "HISTOGRAM" {
			scraped[name+"_bucket"], scraped[name+"_sum"], scraped[name+"_count"] = true, true, true
		}
	}
	for _, n := range names {
		if scraped[n] {
			continue
		}
		t.Errorf("%s is used by the dashboard or the alerts but the gateway does not export it", n)
	}
	t.Logf("%d metric names checked against a live scrape: %v", len(names), names)
}
