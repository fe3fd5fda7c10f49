package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The soak mode runs the gateway for a long time (10 minutes by default)
// under mixed traffic with faults on both sides, and reports whether it
// leaks: RSS, goroutines and open file descriptors at the start (after a
// warm-up) and at the end (after the load stops and idle connections
// expire), plus a sample every 30 s. Traffic: unary and streamed chat,
// streams abandoned by their client, unauthenticated requests that
// declare a body and never send it, bodies trickled slower than
// limits.body_timeout, oversized bodies, health checks. Upstream faults:
// 500s, 429s, hangs past timeouts.read, streams cut mid-way or silent
// after their headers, HTML and JSON-array 200s.
//
//	bench soak --gateway PATH [--duration 10m] [--clients 24] [--out DIR]

// soakSample is the gateway process at one moment.
type soakSample struct {
	At         float64 `json:"at_s"`
	RSSKB      int64   `json:"rss_kb"`
	Goroutines int64   `json:"goroutines"`
	FDs        int     `json:"open_fds"`
}

// SoakReport is the result of a soak run.
type SoakReport struct {
	Started  time.Time      `json:"started"`
	Duration string         `json:"duration"`
	Clients  int            `json:"clients"`
	Start    soakSample     `json:"start"`
	End      soakSample     `json:"end"`
	Peak     soakSample     `json:"peak"`
	Samples  []soakSample   `json:"samples"`
	Requests map[string]int `json:"requests"` // kind/status -> count
	Faults   map[string]int `json:"upstream_faults"`
	Errors   int            `json:"client_errors"`
}

const soakToken = "soak-token"

func soakMain(args []string) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	gw := fs.String("gateway", "", "switchboard binary to soak (required)")
	dur := fs.Duration("duration", 10*time.Minute, "how long the load runs")
	clients := fs.Int("clients", 24, "concurrent clients")
	out := fs.String("out", "bench/results", "directory for soak-<time>.json and the gateway log")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *gw == "" {
		logf("bench soak: --gateway is required")
		return 2
	}
	rep, err := Soak(*gw, *out, *dur, *clients, os.Stderr)
	if err != nil {
		logf("bench soak: %v", err)
		return 1
	}
	fmt.Print(rep.Markdown())
	return 0
}

// Soak runs the gateway binary gw under the soak load for d.
func Soak(gw, out string, d time.Duration, clients int, progress io.Writer) (*SoakReport, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	faults := &faultCounts{m: map[string]int{}}
	up := &http.Server{Handler: faultUpstream(faults), ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog()}
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() { _ = up.Serve(upLn) }()
	defer up.Close()

	dir, err := os.MkdirTemp("", "soak")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "config.yaml")
	upURL := "http://" + upLn.Addr().String()
	if err := os.WriteFile(cfg, []byte(soakConfig(upURL)), 0o600); err != nil {
		return nil, err
	}
	cmd, addr, err := serveGateway(gw, cfg, dir, filepath.Join(out, "soak-gateway.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://" + addr

	rep := &SoakReport{Started: time.Now().UTC(), Duration: d.String(), Clients: clients, Requests: map[string]int{}}
	var mu sync.Mutex
	count := func(k string) { mu.Lock(); rep.Requests[k]++; mu.Unlock() }
	var errs atomic.Int64
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2}, Timeout: 60 * time.Second}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			for ctx.Err() == nil {
				kind, status, err := soakRequest(ctx, client, base, addr, rng)
				if err != nil && ctx.Err() == nil {
					errs.Add(1)
					kind += "/error"
				}
				count(kind + "/" + strconv.Itoa(status))
			}
		}(uint64(i))
	}
	sample := func(at time.Duration) soakSample {
		s := soakSample{At: at.Seconds()}
		s.RSSKB, _, _ = procStatus(cmd.Process.Pid)
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid)); err == nil {
			s.FDs = len(ents)
		}
		s.Goroutines = scrapeGauge(base+"/metrics", "go_goroutines")
		return s
	}
	t0 := time.Now()
	warm := min(30*time.Second, d/10)
	time.Sleep(warm)
	rep.Start = sample(time.Since(t0))
	rep.Peak = rep.Start
	fmt.Fprintf(progress, "soak: start %+v\n", rep.Start)
	tick := time.NewTicker(30 * time.Second)
	end := time.After(d - warm)
loop:
	for {
		select {
		case <-tick.C:
			s := sample(time.Since(t0))
			rep.Samples = append(rep.Samples, s)
			if s.RSSKB > rep.Peak.RSSKB {
				rep.Peak = s
			}
			fmt.Fprintf(progress, "soak: %+v\n", s)
		case <-end:
			break loop
		}
	}
	tick.Stop()
	stop()
	wg.Wait()
	client.CloseIdleConnections()
	// Idle upstream connections and abandoned client ones close within
	// their timeouts; wait for the gateway to settle before the last look.
	time.Sleep(15 * time.Second)
	rep.End = sample(time.Since(t0))
	rep.Errors = int(errs.Load())
	rep.Faults = faults.snapshot()
	b, _ := json.MarshalIndent(rep, "", "  ")
	name := filepath.Join(out, "soak-"+rep.Started.Format("20060102-150405")+".json")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "soak: wrote %s\n", name)
	return rep, nil
}

func soakConfig(upURL string) string {
	return `# written by bench soak: two providers on one fault-injecting upstream
providers:
  a: {type: openai, base_url: ` + upURL + `/a/v1, api_key: sk-soak-upstream-a}
  b: {type: openai, base_url: ` + upURL + `/b/v1, api_key: sk-soak-upstream-b}
models:
  - name: m
    providers: [{provider: a}, {provider: b}]
retries: {max_attempts: 2, max_rounds: 2, backoff_base: 0.05, max_backoff: 0.5}
timeouts: {read: 2, request: 20, stream: 30, shutdown: 2}
limits: {body_timeout: 2, max_request_body: 65536, max_concurrency: 10000}
health: {breaker: {threshold: 50, window: 10, cooldown: 1}}
performance: {quota_pause_default_seconds: 1}
auth: {token: ` + soakToken + `}
logging: {level: warn}
store: {backend: memory}
`
}

// serveGateway starts gw serve on cfg with STATE_DIR stateDir, its output
// to logPath, and waits until it is healthy; the caller kills cmd.
func serveGateway(gw, cfg, stateDir, logPath string) (cmd *exec.Cmd, addr string, err error) {
	if addr, err = freePort(); err != nil {
		return nil, "", err
	}
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	defer lf.Close()
	cmd = exec.Command(gw, "serve", "--config", cfg, "--listen", addr)
	cmd.Env = append(os.Environ(), "STATE_DIR="+stateDir)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	if err := waitHealthy("http://" + addr); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, "", fmt.Errorf("%v%s", err, tail(logPath))
	}
	return cmd, addr, nil
}

func waitHealthy(base string) error {
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
	}
	return fmt.Errorf("gateway not healthy in 15 s")
}

// scrapeGauge reads one unlabelled gauge from a Prometheus exposition.
func scrapeGauge(url, name string) int64 { return scrapeGaugeAs(url, name, soakToken) }

// scrapeGaugeAs is scrapeGauge with the gateway key token (/metrics is
// behind the gateway token or an admin key); -1 when it cannot be read.
func scrapeGaugeAs(url, name, token string) int64 {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, name+" ") {
			f, _ := strconv.ParseFloat(strings.TrimPrefix(l, name+" "), 64)
			return int64(f)
		}
	}
	return -1
}

const soakChat = `{"model":"m","max_tokens":%d,"stream":%t,"messages":[{"role":"user","content":"soak"}]}`

// soakRequest makes one client request of a random kind; it returns the
// kind and the status seen (0 when none).
func soakRequest(ctx context.Context, c *http.Client, base, addr string, rng *rand.Rand) (string, int, error) {
	post := func(body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+soakToken)
		req.Header.Set("Content-Type", "application/json")
		return c.Do(req)
	}
	switch p := rng.IntN(100); {
	case p < 80: // unary (55 %) or a stream read to its end (25 %)
		kind, stream := "unary", p >= 55
		if stream {
			kind = "stream"
		}
		resp, err := post(fmt.Sprintf(soakChat, 8+rng.IntN(64), stream))
		if err != nil {
			return kind, 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return kind, resp.StatusCode, err
	case p < 86: // stream abandoned after its first line
		resp, err := post(fmt.Sprintf(soakChat, 200, true))
		if err != nil {
			return "abandoned", 0, err
		}
		_, _ = bufio.NewReader(resp.Body).ReadString('\n')
		resp.Body.Close()
		return "abandoned", resp.StatusCode, nil
	case p < 90: // no key, a declared body never sent: 401 at once
		return "nokey-stalled-body", rawStatus(addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{", 0), nil
	case p < 93: // a body slower than limits.body_timeout: 408
		return "slow-body", rawStatus(addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+soakToken+
			"\r\nContent-Length: 100\r\n\r\n{", 5), nil
	case p < 95: // oversized: 413
		resp, err := post(`{"model":"m","pad":"` + strings.Repeat("x", 70000) + `"}`)
		if err != nil {
			return "oversize", 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return "oversize", resp.StatusCode, nil
	default:
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
		resp, err := c.Do(req)
		if err != nil {
			return "health", 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return "health", resp.StatusCode, nil
	}
}

// rawStatus writes head on a new connection, trickles one byte per second
// for trickle seconds, and returns the status of the answer (0 if none
// within 10 s).
func rawStatus(addr, head string, trickle int) int {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		return 0
	}
	go func() {
		for range trickle {
			time.Sleep(time.Second)
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

type faultCounts struct {
	mu sync.Mutex
	m  map[string]int
}

func (f *faultCounts) add(k string) { f.mu.Lock(); f.m[k]++; f.mu.Unlock() }

func (f *faultCounts) snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.m))
	for k, v := range f.m {
		out[k] = v
	}
	return out
}

// faultUpstream is an OpenAI-compatible upstream that fails about one
// request in six, in every way the gateway must survive.
func faultUpstream(fc *faultCounts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		stream := bytes.Contains(body, []byte(`"stream":true`))
		n := 8
		if i := bytes.Index(body, []byte(`"max_tokens":`)); i >= 0 {
			n, _ = strconv.Atoi(strings.TrimRight(string(body[i+13:min(len(body), i+17)]), ",}\" "))
			n = max(1, min(n, 200))
		}
		fault := "none"
		switch p := rand.IntN(1000); {
		case p < 40:
			fault = "500"
		case p < 60:
			fault = "429"
		case p < 75:
			fault = "hang"
		case p < 95 && stream:
			fault = "cut"
		case p < 105 && stream:
			fault = "silent"
		case p < 115:
			fault = "html"
		case p < 125 && !stream:
			fault = "array"
		}
		fc.add(fault)
		switch fault {
		case "500":
			w.WriteHeader(500)
			_, _ = io.WriteString(w, `{"error":{"message":"upstream broke","type":"server_error"}}`)
			return
		case "429":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached, try again in 1s","type":"rate_limit_error"}}`)
			return
		case "hang", "silent":
			if fault == "silent" {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
			}
			select { // until the gateway gives up (timeouts.read)
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		case "html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>bad gateway</html>")
			return
		case "array":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `[{"choices":[]}]`)
			return
		}
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d}}`,
				strings.Repeat("tok ", n), n, n+3)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		cut := -1
		if fault == "cut" {
			cut = n / 2
		}
		for i := range n {
			if i == cut {
				if hj, ok := w.(http.Hijacker); ok {
					if c, _, err := hj.Hijack(); err == nil {
						c.Close() // mid-stream, no terminator
					}
				}
				return
			}
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok \"}}]}\n\n")
			fl.Flush()
			if r.Context().Err() != nil {
				return
			}
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		}
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", n, n+3)
	})
}

// Markdown renders the report for BENCHMARKS.md.
func (r *SoakReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Soak run %s: %s of load, %d clients.\n\n", r.Started.Format(time.RFC3339), r.Duration, r.Clients)
	b.WriteString("| gateway process | start (after warm-up) | peak RSS sample | end (load stopped, 15 s settle) |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| RSS | %.1f MiB | %.1f MiB (at %.0f s) | %.1f MiB |\n", float64(r.Start.RSSKB)/1024, float64(r.Peak.RSSKB)/1024, r.Peak.At, float64(r.End.RSSKB)/1024)
	fmt.Fprintf(&b, "| goroutines | %d | %d | %d |\n", r.Start.Goroutines, r.Peak.Goroutines, r.End.Goroutines)
	fmt.Fprintf(&b, "| open fds | %d | %d | %d |\n\n", r.Start.FDs, r.Peak.FDs, r.End.FDs)
	keys := make([]string, 0, len(r.Requests))
	total := 0
	for k, v := range r.Requests {
		keys = append(keys, k)
		total += v
	}
	sort.Strings(keys)
	fmt.Fprintf(&b, "%d client requests (kind/status: count): ", total)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, r.Requests[k])
	}
	b.WriteString(".\n\nUpstream faults injected: ")
	fk := make([]string, 0, len(r.Faults))
	for k := range r.Faults {
		fk = append(fk, k)
	}
	sort.Strings(fk)
	for i, k := range fk {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, r.Faults[k])
	}
	fmt.Fprintf(&b, ". Client-side transport errors: %d.\n", r.Errors)
	return b.String()
}
