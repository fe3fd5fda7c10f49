package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The hedge mode measures what hedged requests do to the TTFT tail. Two
// in-process upstreams serve one model: "tail" (the configured first, the
// active provider) answers its first token after --ttft, but 10 % of its
// answers come --tail-mult times later; "steady" always answers after
// --ttft. The same closed-loop streaming load runs through the gateway
// with hedging off, then with each hedge setting, each on a fresh
// gateway; the client measures TTFT (request sent to first content
// chunk) and the upstreams count the calls they got, so extra calls are
// (calls - requests) / requests.
//
//	bench hedge --gateway PATH [--requests 2000] [--concurrency 8] [--ttft 20ms]
//	            [--tail-frac 0.1] [--tail-mult 20] [--after 30ms,p85,p90] [--out DIR]

// HedgeRun is one gateway setting's result.
type HedgeRun struct {
	Setting  string  `json:"setting"` // "off" or the hedge's after
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	TTFTP50  float64 `json:"ttft_p50_ms"`
	TTFTP90  float64 `json:"ttft_p90_ms"`
	TTFTP99  float64 `json:"ttft_p99_ms"`
	TTFTMax  float64 `json:"ttft_max_ms"`
	Calls    int64   `json:"upstream_calls"`
	// Extra is (upstream calls - requests) / requests.
	Extra float64 `json:"extra_calls"`
	// TailAnswers is how many of the tail provider's answers were slow.
	TailAnswers int64 `json:"tail_answers"`
}

// HedgeReport is a hedge mode run.
type HedgeReport struct {
	Started     time.Time  `json:"started"`
	Requests    int        `json:"requests"`
	Concurrency int        `json:"concurrency"`
	TTFT        string     `json:"upstream_ttft"`
	TailFrac    float64    `json:"tail_fraction"`
	TailMult    int        `json:"tail_multiplier"`
	Runs        []HedgeRun `json:"runs"`
}

// HedgeOptions configure Hedge.
type HedgeOptions struct {
	Gateway, Out          string
	Requests, Concurrency int
	// Warm requests run first on each gateway (unmeasured): the routing
	// samples a percentile delay is read from.
	Warm     int
	TTFT     time.Duration
	TailFrac float64
	TailMult int
	// Afters are the hedge settings to compare with "off".
	Afters   []string
	Progress io.Writer
}

func hedgeMain(args []string) int {
	fs := flag.NewFlagSet("hedge", flag.ContinueOnError)
	o := HedgeOptions{Progress: os.Stderr}
	fs.StringVar(&o.Gateway, "gateway", "", "switchboard binary to measure (required)")
	fs.StringVar(&o.Out, "out", "bench/results", "directory for hedge-latest.json/.md and the gateway logs")
	fs.IntVar(&o.Requests, "requests", 2000, "measured streamed requests per setting")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "concurrent clients")
	fs.IntVar(&o.Warm, "warm", 200, "unmeasured requests first on each gateway")
	fs.DurationVar(&o.TTFT, "ttft", 20*time.Millisecond, "upstream time to first token")
	fs.Float64Var(&o.TailFrac, "tail-frac", 0.1, "fraction of the tail provider's answers that are slow")
	fs.IntVar(&o.TailMult, "tail-mult", 20, "how many times slower a slow answer is")
	afters := fs.String("after", "30ms,p85,p90", "hedge settings to compare with off (comma-separated)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.Gateway == "" {
		logf("bench hedge: --gateway is required")
		return 2
	}
	o.Afters = strings.Split(*afters, ",")
	rep, err := Hedge(o)
	if err != nil {
		logf("bench hedge: %v", err)
		return 1
	}
	fmt.Print(rep.Markdown())
	return 0
}

// tailUpstream streams a short chat answer after a first-token delay that
// is, for a fraction of answers, mult times longer.
type tailUpstream struct {
	ttft  time.Duration
	frac  float64
	mult  int
	calls atomic.Int64
	slow  atomic.Int64
	mu    sync.Mutex
	rng   *rand.Rand
}

func (u *tailUpstream) delay() time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.frac > 0 && u.rng.Float64() < u.frac {
		u.slow.Add(1)
		return u.ttft * time.Duration(u.mult)
	}
	return u.ttft
}

func (u *tailUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		return
	}
	u.calls.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header()["Content-Type"] = hdrSSE
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	_, _ = w.Write(roleEvent)
	f.Flush()
	t := time.NewTimer(u.delay())
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return // canceled: a hedge won
	}
	for range 8 {
		if _, err := w.Write(tokenEvent); err != nil {
			return
		}
	}
	_, _ = w.Write(finishEventOf(8))
	_, _ = w.Write(doneEvent)
	f.Flush()
}

func (u *tailUpstream) serve() (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog()}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// hedgeConfig routes bench-model to tail, then steady; hedge is "" (off)
// or the hedge's after. Probing is off so that every upstream call is a
// request's attempt.
func hedgeConfig(tailURL, steadyURL, after string) string {
	h := ""
	if after != "" {
		h = "hedge: {after: " + after + "}\n"
	}
	return `# written by bench hedge
providers:
  tail: {type: openai, base_url: ` + tailURL + `/v1, api_key: sk-bench}
  steady: {type: openai, base_url: ` + steadyURL + `/v1, api_key: sk-bench}
models:
  - name: ` + benchModel + `
    providers: [{provider: tail, model: ` + upstreamModel + `}, {provider: steady, model: ` + upstreamModel + `}]
performance: {probing_enabled: false}
tracking: {enabled: true}
logging: {level: warn}
timeouts: {shutdown: 1}
store: {backend: memory}
limits: {max_concurrency: 20000}
` + h
}

// Hedge runs the hedge mode.
func Hedge(o HedgeOptions) (*HedgeReport, error) {
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	rep := &HedgeReport{Started: time.Now().UTC(), Requests: o.Requests, Concurrency: o.Concurrency,
		TTFT: o.TTFT.String(), TailFrac: o.TailFrac, TailMult: o.TailMult}
	for i, after := range append([]string{""}, o.Afters...) {
		tail := &tailUpstream{ttft: o.TTFT, frac: o.TailFrac, mult: o.TailMult, rng: rand.New(rand.NewPCG(1, uint64(i)))}
		steady := &tailUpstream{ttft: o.TTFT, rng: rand.New(rand.NewPCG(2, uint64(i)))}
		run, err := hedgeRun(o, tail, steady, after)
		if err != nil {
			return nil, err
		}
		rep.Runs = append(rep.Runs, *run)
		fmt.Fprintf(o.Progress, "hedge %s: p50 %.1f ms p99 %.1f ms, extra calls %.1f %%\n",
			run.Setting, run.TTFTP50, run.TTFTP99, 100*run.Extra)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(o.Out, "hedge-latest.json"), b, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "hedge-latest.md"), []byte(rep.Markdown()), 0o644); err != nil {
		return nil, err
	}
	return rep, nil
}

func hedgeRun(o HedgeOptions, slow, steady *tailUpstream, after string) (*HedgeRun, error) {
	tailURL, stopTail, err := slow.serve()
	if err != nil {
		return nil, err
	}
	defer stopTail()
	steadyURL, stopSteady, err := steady.serve()
	if err != nil {
		return nil, err
	}
	defer stopSteady()
	dir, err := os.MkdirTemp("", "bench-hedge")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(hedgeConfig(tailURL, steadyURL, after)), 0o600); err != nil {
		return nil, err
	}
	setting := after
	if setting == "" {
		setting = "off"
	}
	logPath := filepath.Join(o.Out, "hedge-gateway-"+strings.NewReplacer("/", "_", " ", "_").Replace(setting)+".log")
	cmd, addr, err := serveGateway(o.Gateway, cfg, dir, logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://" + addr
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Concurrency * 2}, Timeout: 60 * time.Second}
	defer client.CloseIdleConnections()
	if _, errs := hedgeLoad(client, base, o.Warm, o.Concurrency); errs > 0 {
		return nil, fmt.Errorf("%d warm-up requests failed%s", errs, tail(logPath))
	}
	calls0, slow0 := slow.calls.Load()+steady.calls.Load(), slow.slow.Load()
	ttfts, errs := hedgeLoad(client, base, o.Requests, o.Concurrency)
	// Canceled losers are counted when they arrive; let the last ones land.
	time.Sleep(50 * time.Millisecond)
	run := &HedgeRun{Setting: setting, Requests: o.Requests, Errors: errs,
		Calls: slow.calls.Load() + steady.calls.Load() - calls0, TailAnswers: slow.slow.Load() - slow0}
	run.Extra = float64(run.Calls-int64(o.Requests)) / float64(o.Requests)
	slices.Sort(ttfts)
	ms := func(q float64) float64 {
		if len(ttfts) == 0 {
			return 0
		}
		i := int(float64(len(ttfts))*q+0.999999) - 1
		return float64(ttfts[max(0, min(i, len(ttfts)-1))]) / float64(time.Millisecond)
	}
	run.TTFTP50, run.TTFTP90, run.TTFTP99, run.TTFTMax = ms(0.5), ms(0.9), ms(0.99), ms(1)
	return run, nil
}

// hedgeLoad sends n streamed requests over c clients and returns each
// one's TTFT: from the send to the first content chunk.
func hedgeLoad(client *http.Client, base string, n, c int) ([]time.Duration, int) {
	body := `{"model":"` + benchModel + `","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hedge bench"}]}`
	var next atomic.Int64
	var mu sync.Mutex
	var out []time.Duration
	var errs atomic.Int64
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				d, err := hedgeOne(client, base, body)
				if err != nil {
					errs.Add(1)
					continue
				}
				mu.Lock()
				out = append(out, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, int(errs.Load())
}

func hedgeOne(client *http.Client, base, body string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	var first time.Duration
	done := false
	for sc.Scan() {
		l := sc.Text()
		if first == 0 && strings.Contains(l, `"content":" token"`) {
			first = time.Since(start)
		}
		if l == "data: [DONE]" {
			done = true
		}
	}
	if first == 0 || !done {
		return 0, fmt.Errorf("stream without a token or [DONE]")
	}
	return first, nil
}

// Markdown renders the report as a table with p99 ratios against "off".
func (r *HedgeReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Hedge mode, %s: %d streamed requests per setting, %d concurrent; upstream TTFT %s, "+
		"%.0f %% of the active provider's answers %d× slower.\n\n", r.Started.Format("2006-01-02 15:04 UTC"),
		r.Requests, r.Concurrency, r.TTFT, 100*r.TailFrac, r.TailMult)
	b.WriteString("| hedge | TTFT p50 | TTFT p90 | TTFT p99 | max | p99 cut | extra upstream calls | slow answers drawn | errors |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	var off float64
	for _, run := range r.Runs {
		if run.Setting == "off" {
			off = run.TTFTP99
		}
		cut := "—"
		if run.Setting != "off" && run.TTFTP99 > 0 && off > 0 {
			cut = fmt.Sprintf("%.1f×", off/run.TTFTP99)
		}
		fmt.Fprintf(&b, "| %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %s | %.1f %% | %d | %d |\n", run.Setting,
			run.TTFTP50, run.TTFTP90, run.TTFTP99, run.TTFTMax, cut, 100*run.Extra, run.TailAnswers, run.Errors)
	}
	return b.String()
}
