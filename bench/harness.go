package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Options configure one harness run.
type Options struct {
	// Gateway is the switchboard binary to measure.
	Gateway string
	// Out receives latest.json, latest.md, logs/ and profiles.
	Out string
	// Smoke runs every mode for a fraction of a second at low load: it
	// proves the harness works, it measures nothing.
	Smoke bool
	// Profile collects CPU and allocation profiles of the gateway under
	// load after the measured modes (it starts the gateway with --pprof).
	Profile bool
	// Only restricts the run to these mode roles or names (nil = all).
	Only []string
	// Self is the argv prefix that starts a child: this binary, or the test
	// binary with BENCH_CHILD=1 in the environment.
	Self []string
	// Progress receives one line per measured run; Table the final table.
	Progress, Table io.Writer
}

// Mode is one workload, run against every target.
type Mode struct {
	Name     string        `json:"name"`
	Role     string        `json:"role"`
	Kind     string        `json:"kind"`
	Title    string        `json:"title"`
	Conc     int           `json:"concurrency,omitempty"`
	Rate     float64       `json:"rate,omitempty"`
	Duration time.Duration `json:"duration"`
	Slices   int           `json:"slices"`
	Streams  int           `json:"streams,omitempty"`
	Ramp     time.Duration `json:"ramp,omitempty"`
	Tokens   int           `json:"tokens,omitempty"`
	Interval time.Duration `json:"interval,omitempty"`
	// Meter, when set, runs the gateway metered with that store (sqlite,
	// memory, redis): see metered.go.
	Meter string `json:"meter,omitempty"`
	// Queue runs the gateway with queue.mode: redis (one process, role
	// all: enqueue, lease, run, publish back) on a throwaway Redis; its
	// figures against the same mode with the queue off are the queue's
	// added latency.
	Queue bool `json:"queue,omitempty"`
	// NoUsageLog turns the per-request usage log off (usage_log.enabled:
	// false); it is on by default, in a fresh STATE_DIR per mode. Paired
	// with the same mode on, it is the usage log's cost.
	NoUsageLog bool `json:"no_usage_log,omitempty"`
	// Board modes (board.go): Pin runs the proxies on one core and the
	// rest on the other; BodyKB pads requests; DefaultLimits keeps the
	// gateway's default limits.max_concurrency; Sweep lists the
	// concurrencies of a kindSweep mode; StallAfter is the time to first
	// token past which a stream counts as stalled.
	Pin           bool          `json:"pin,omitempty"`
	BodyKB        int           `json:"body_kb,omitempty"`
	DefaultLimits bool          `json:"default_limits,omitempty"`
	Sweep         []int         `json:"sweep,omitempty"`
	StallAfter    time.Duration `json:"stall_after,omitempty"`
	// Traced turns tracing on (sample ratio 1) with an OTLP/HTTP sink in
	// the harness (traced.go); paired with the same mode untraced, it is
	// tracing's cost.
	Traced bool `json:"traced,omitempty"`
}

// plan is the list of modes. The full plan fits ./scripts/bench in under
// five minutes on two cores: each open- or closed-loop mode gets 10 s per
// target, as four 2.5 s slices whose order rotates, so that a burst of
// foreign load on a shared machine hits every target alike.
func plan(smoke bool) []Mode {
	if smoke {
		d := 300 * time.Millisecond
		return append([]Mode{
			{Role: "closed-lo", Kind: kindClosed, Conc: 4, Duration: d, Slices: 1},
			{Role: "closed-hi", Kind: kindClosed, Conc: 8, Duration: d, Slices: 1},
			{Role: "open-lo", Kind: kindOpen, Rate: 50, Duration: d, Slices: 1},
			{Role: "open-hi", Kind: kindOpen, Rate: 100, Duration: d, Slices: 1},
			{Role: "stream-open", Kind: kindStreamOpen, Rate: 30, Duration: d, Slices: 1, Tokens: 5, Interval: 5 * time.Millisecond},
			{Role: "streams", Kind: kindStreamConc, Streams: 30, Ramp: 50 * time.Millisecond, Tokens: 10, Interval: 10 * time.Millisecond, Slices: 1},
			{Role: "streams-big", Kind: kindStreamConc, Streams: 60, Ramp: 50 * time.Millisecond, Tokens: 5, Interval: 10 * time.Millisecond, Slices: 1},
			{Role: "metered-sqlite", Kind: kindClosed, Conc: 4, Duration: d, Slices: 1, Meter: meterSQLite},
			{Role: "metered-memory", Kind: kindClosed, Conc: 4, Duration: d, Slices: 1, Meter: meterMemory},
			{Role: "metered-redis", Kind: kindClosed, Conc: 4, Duration: d, Slices: 1, Meter: meterRedis},
			{Role: "metered-open-sqlite", Kind: kindOpen, Rate: 50, Duration: d, Slices: 1, Meter: meterSQLite},
			{Role: "metered-open-redis", Kind: kindOpen, Rate: 50, Duration: d, Slices: 1, Meter: meterRedis},
			{Role: "metered-sqlite-nolog", Kind: kindClosed, Conc: 4, Duration: d, Slices: 1, Meter: meterSQLite, NoUsageLog: true},
			{Role: "queue-open", Kind: kindOpen, Rate: 50, Duration: d, Slices: 1, Queue: true},
			{Role: "queue-stream-open", Kind: kindStreamOpen, Rate: 30, Duration: d, Slices: 1, Tokens: 5, Interval: 5 * time.Millisecond, Queue: true},
			{Role: "traced-closed", Kind: kindClosed, Conc: 4, Duration: d, Slices: 1, Traced: true},
		}, boardPlan(true)...)
	}
	// The metered modes get 6 s per target (three slices of 2 s) to keep
	// the whole run near five minutes.
	const md = 6 * time.Second
	const d = 10 * time.Second
	return append([]Mode{
		{Role: "closed-lo", Kind: kindClosed, Conc: 16, Duration: d, Slices: 4},
		{Role: "closed-hi", Kind: kindClosed, Conc: 64, Duration: d, Slices: 4},
		{Role: "open-lo", Kind: kindOpen, Rate: 300, Duration: d, Slices: 4},
		{Role: "open-hi", Kind: kindOpen, Rate: 1000, Duration: d, Slices: 4},
		{Role: "stream-open", Kind: kindStreamOpen, Rate: 150, Duration: d, Slices: 4, Tokens: 50, Interval: 20 * time.Millisecond},
		{Role: "streams", Kind: kindStreamConc, Streams: 1000, Ramp: time.Second, Tokens: 200, Interval: 20 * time.Millisecond, Slices: 1},
		{Role: "streams-big", Kind: kindStreamConc, Streams: 10000, Ramp: 5 * time.Second, Tokens: 200, Interval: 20 * time.Millisecond, Slices: 1},
		{Role: "metered-sqlite", Kind: kindClosed, Conc: 16, Duration: md, Slices: 3, Meter: meterSQLite},
		{Role: "metered-memory", Kind: kindClosed, Conc: 16, Duration: md, Slices: 3, Meter: meterMemory},
		{Role: "metered-redis", Kind: kindClosed, Conc: 16, Duration: md, Slices: 3, Meter: meterRedis},
		{Role: "metered-open-sqlite", Kind: kindOpen, Rate: 300, Duration: md, Slices: 3, Meter: meterSQLite},
		{Role: "metered-open-redis", Kind: kindOpen, Rate: 300, Duration: md, Slices: 3, Meter: meterRedis},
		// The usage log's cost: the SQLite metered modes again with it off.
		{Role: "metered-sqlite-nolog", Kind: kindClosed, Conc: 16, Duration: md, Slices: 3, Meter: meterSQLite, NoUsageLog: true},
		{Role: "metered-open-sqlite-nolog", Kind: kindOpen, Rate: 300, Duration: md, Slices: 3, Meter: meterSQLite, NoUsageLog: true},
		// The queue's added latency: the same 100 requests/s and 50
		// streams/s with the queue off, then on.
		{Role: "open-100", Kind: kindOpen, Rate: 100, Duration: md, Slices: 3},
		{Role: "queue-open", Kind: kindOpen, Rate: 100, Duration: md, Slices: 3, Queue: true},
		{Role: "stream-open-50", Kind: kindStreamOpen, Rate: 50, Duration: md, Slices: 3, Tokens: 50, Interval: 20 * time.Millisecond},
		{Role: "queue-stream-open", Kind: kindStreamOpen, Rate: 50, Duration: md, Slices: 3, Tokens: 50, Interval: 20 * time.Millisecond, Queue: true},
		// Tracing's cost: closed-lo and stream-open-50 again with every
		// request traced.
		{Role: "traced-closed", Kind: kindClosed, Conc: 16, Duration: d, Slices: 4, Traced: true},
		{Role: "traced-stream-open", Kind: kindStreamOpen, Rate: 50, Duration: md, Slices: 3, Tokens: 50, Interval: 20 * time.Millisecond, Traced: true},
	}, boardPlan(false)...)
}

func (m *Mode) fill() {
	switch m.Kind {
	case kindClosed:
		m.Name = fmt.Sprintf("closed-c%d", m.Conc)
		m.Title = fmt.Sprintf("closed loop, %d connections, non-streaming", m.Conc)
	case kindOpen:
		m.Name = fmt.Sprintf("open-%.0frps", m.Rate)
		m.Title = fmt.Sprintf("open loop, %.0f requests/s, non-streaming", m.Rate)
	case kindStreamOpen:
		m.Name = fmt.Sprintf("stream-open-%.0f", m.Rate)
		m.Title = fmt.Sprintf("open loop, %.0f streams/s of %d tokens at %v", m.Rate, m.Tokens, m.Interval)
	case kindStreamConc:
		m.Name = fmt.Sprintf("streams-%d", m.Streams)
		m.Title = fmt.Sprintf("%d concurrent streams of %d tokens at %v, started over %v", m.Streams, m.Tokens, m.Interval, m.Ramp)
	case kindSweep:
		m.Name = "frontier"
		m.Title = fmt.Sprintf("closed-loop concurrency sweep %v, non-streaming, %v per level and target", m.Sweep, m.Duration)
	}
	m.fillBoard()
	if m.Meter != "" {
		m.Name = "metered-" + m.Meter + "-" + strings.TrimPrefix(strings.TrimPrefix(m.Name, "closed-"), "open-")
		m.Title += ", metered (tenant key with RPM, TPM, daily count and budget; priced model; store " + m.Meter + ")"
	}
	if m.NoUsageLog {
		m.Name += "-nolog"
		m.Title += ", usage log off"
	}
	if m.Traced {
		m.Name += "-traced"
		m.Title += ", tracing on (sample_ratio 1, OTLP/HTTP to a sink in the harness)"
	}
	if m.Queue {
		m.Name = "queue-" + m.Name
		m.Title += ", queue.mode: redis (one gateway process, role all, Redis on loopback)"
	}
	if m.Kind != kindStreamConc && m.Kind != kindSweep {
		m.Title += fmt.Sprintf(", %v per target in %d slice(s)", m.Duration, m.Slices)
	}
}

// selected reports whether --only names m: its role, its name,
// "metered" for every metered mode or "traced" for every traced one.
func selected(only []string, m Mode) bool {
	return len(only) == 0 || slices.Contains(only, m.Role) || slices.Contains(only, m.Name) ||
		(m.Meter != "" && slices.Contains(only, "metered")) || (m.Traced && slices.Contains(only, "traced"))
}

// child is one process of the run.
type child struct {
	name  string
	cmd   *exec.Cmd
	pid   int
	addr  string
	log   string
	hello hello
	stdin io.WriteCloser
	dec   *json.Decoder
}

func (c *child) stop() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// target is one way to reach the upstream: direct, baseline or gateway.
type target struct {
	name  string
	url   string
	proxy *child // nil for direct
}

var targetNames = []string{"direct", "baseline", "gateway"}

type harness struct {
	o       Options
	logDir  string
	tmp     string
	token   string
	loadgen *child
	up      *child
	base    *child
	gw      *child
	redis   *child    // metered redis modes only
	sink    *otlpSink // traced modes only, started with the first
	pprof   string
	pin     bool // this mode's processes are pinned (board.go)
	targets []*target
	report  *Report
	started time.Time
}

func runMain(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	gw := fs.String("gateway", "", "switchboard binary to measure (required)")
	out := fs.String("out", "bench/results", "directory for latest.json, latest.md, logs and profiles")
	smoke := fs.Bool("smoke", false, "a few seconds at low load, no figures worth quoting")
	profile := fs.Bool("profile", false, "also profile the gateway under load (pprof) and save the profiles")
	only := fs.String("only", "", "comma-separated mode roles or names to run (default all)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *gw == "" {
		logf("bench: --gateway is required (./scripts/bench builds it)")
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		logf("bench: %v", err)
		return 1
	}
	o := Options{Gateway: *gw, Out: *out, Smoke: *smoke, Profile: *profile, Self: []string{self},
		Progress: os.Stderr, Table: os.Stdout}
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	if _, err := Run(o); err != nil {
		logf("bench: %v", err)
		return 1
	}
	return 0
}

// Run executes the plan and writes the report.
func Run(o Options) (*Report, error) {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Table == nil {
		o.Table = io.Discard
	}
	gw, err := filepath.Abs(o.Gateway)
	if err != nil {
		return nil, err
	}
	o.Gateway = gw
	h := &harness{o: o, logDir: filepath.Join(o.Out, "logs"), token: "sk-bench-0123456789abcdef"}
	_ = os.RemoveAll(h.logDir)
	if err := os.MkdirAll(h.logDir, 0o755); err != nil {
		return nil, err
	}
	if h.tmp, err = os.MkdirTemp("", "switchboard-bench-"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(h.tmp)
	start := time.Now()
	h.started = start
	soft, hard, _ := raiseNofile(1 << 20)
	h.report = &Report{Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), CPUs: runtime.NumCPU(),
		GoVersion: runtime.Version(), Kernel: kernel(), CPUModel: cpuModel(), Smoke: o.Smoke, Nofile: soft, NofileHard: hard,
		EphemeralPorts: ephemeralPorts()}
	defer h.stopAll()
	if h.loadgen, err = h.startChild("loadgen"); err != nil {
		return nil, err
	}
	for i, m := range plan(o.Smoke) {
		m.fill()
		if !selected(o.Only, m) {
			continue
		}
		mr := &ModeResult{Mode: m, Targets: map[string]*TargetResult{}}
		h.report.Modes = append(h.report.Modes, mr)
		if why := feasible(m); why != "" {
			mr.Skipped = why
			fmt.Fprintf(o.Progress, "%-16s skipped: %s\n", m.Name, why)
			continue
		}
		if err := h.runMode(i, m, mr); err != nil {
			return h.report, fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	if o.Profile {
		if err := h.profile(); err != nil {
			return h.report, fmt.Errorf("profile: %w", err)
		}
	}
	h.stopAll()
	h.report.ElapsedSec = time.Since(start).Seconds()
	h.report.Checks = checks(h.report)
	if err := h.write(); err != nil {
		return h.report, err
	}
	return h.report, nil
}

// feasible explains why a mode cannot run on this machine ("" when it can).
func feasible(m Mode) string {
	if (m.Meter == meterRedis || m.Queue) && redisBinary() == "" {
		return "redis-server is not installed"
	}
	if m.Kind != kindStreamConc {
		return ""
	}
	// A proxy holds a client socket and an upstream socket per stream.
	need := uint64(2*m.Streams + 512)
	soft, hard, why := raiseNofile(need)
	if soft < need {
		msg := fmt.Sprintf("each proxy needs about %d open files for %d streams (a client and an upstream socket each) but RLIMIT_NOFILE is %d (hard %d)",
			need, m.Streams, soft, hard)
		if why != "" {
			msg += "; " + why
		}
		return msg
	}
	if p := ephemeralPorts(); p > 0 && p < m.Streams+1024 {
		return fmt.Sprintf("%d streams need more local ports than ip_local_port_range offers (%d)", m.Streams, p)
	}
	return ""
}

func (h *harness) stopAll() {
	h.stopEnv()
	if h.loadgen != nil {
		_ = h.loadgen.stdin.Close()
		h.loadgen.stop()
		h.loadgen = nil
	}
}

func (h *harness) stopEnv() {
	for _, c := range []*child{h.gw, h.base, h.up, h.redis} {
		c.stop()
	}
	h.gw, h.base, h.up, h.redis = nil, nil, nil, nil
}

// startEnv starts a fresh upstream, baseline and gateway, so that each
// mode's RSS figures start from an idle process.
func (h *harness) startEnv(m Mode, pprof bool) error {
	h.stopEnv()
	h.pinFor(m)
	var err error
	if h.up, err = h.startChild("upstream", "--listen", "127.0.0.1:0"); err != nil {
		return err
	}
	if m.Meter == meterRedis || m.Queue {
		if h.redis, err = h.startRedis(); err != nil {
			return err
		}
	}
	upURL := "http://" + h.up.addr
	if h.base, err = h.startChild("baseline", "--listen", "127.0.0.1:0", "--upstream", upURL); err != nil {
		return err
	}
	if h.gw, err = h.startGateway(m, upURL, pprof); err != nil {
		return err
	}
	h.targets = []*target{
		{name: "direct", url: upURL + "/v1/chat/completions"},
		{name: "baseline", url: "http://" + h.base.addr + "/v1/chat/completions", proxy: h.base},
		{name: "gateway", url: "http://" + h.gw.addr + "/v1/chat/completions", proxy: h.gw},
	}
	return nil
}

func (h *harness) startChild(name string, args ...string) (*child, error) {
	argv := append(append(slices.Clone(h.o.Self[1:]), name), args...)
	cmd := h.command(name, h.o.Self[0], argv...)
	cmd.Env = append(os.Environ(), "BENCH_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logPath := filepath.Join(h.logDir, name+".log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd.Stderr = lf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd, log: logPath}
	if name == "loadgen" {
		if c.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.pid = cmd.Process.Pid
	c.dec = json.NewDecoder(stdout)
	got := make(chan error, 1)
	go func() { got <- c.dec.Decode(&c.hello) }()
	select {
	case err := <-got:
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("%s did not start: %v%s", name, err, tail(logPath))
		}
	case <-time.After(15 * time.Second):
		c.stop()
		return nil, fmt.Errorf("%s did not announce itself in 15 s%s", name, tail(logPath))
	}
	c.addr = c.hello.Addr
	return c, nil
}

// gatewayConfig is the config the gateway runs with: one openai provider at
// the fake upstream, one model, tracking on (streams are inspected until
// their first token, the default), auth on as in production, warn logs,
// concurrency limit lifted.
func gatewayConfig(upURL, token string) string {
	return configHead("one openai provider at the fake upstream", upURL) + `auth:
  token: ` + token + `
store:
  backend: memory
`
}

// configHead is what every gateway config of the bench has: the provider,
// the model, tracking, logs, timeouts and the lifted concurrency limit.
func configHead(comment, upURL string) string {
	return `# written by bench: ` + comment + `
providers:
  fake:
    type: openai
    base_url: ` + upURL + `/v1
    api_key: sk-upstream-bench
models:
  - name: ` + benchModel + `
    providers:
      - provider: fake
        model: ` + upstreamModel + `
tracking:
  enabled: true
logging:
  level: warn
timeouts:
  shutdown: 1
` + liftedLimits
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (h *harness) startGateway(m Mode, upURL string, pprof bool) (*child, error) {
	cfg, err := h.writeGatewayConfig(m, upURL)
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--config", cfg, "--listen", addr}
	h.pprof = ""
	if pprof {
		if h.pprof, err = freePort(); err != nil {
			return nil, err
		}
		args = append(args, "--pprof", h.pprof)
	}
	cmd := h.command("gateway", h.o.Gateway, args...)
	// A fresh state directory per mode: provider state and the usage log
	// start empty, as in a new deployment.
	stateDir, err := os.MkdirTemp(h.tmp, "state-")
	if err != nil {
		return nil, err
	}
	cmd.Env = append(os.Environ(), "STATE_DIR="+stateDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logPath := filepath.Join(h.logDir, "gateway.log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start gateway %s: %w", h.o.Gateway, err)
	}
	c := &child{name: "gateway", cmd: cmd, pid: cmd.Process.Pid, addr: addr, log: logPath}
	exited := make(chan struct{})
	go func() { _, _ = cmd.Process.Wait(); close(exited) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c, nil
			}
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("gateway exited at start%s", tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("gateway not healthy after 15 s%s", tail(logPath))
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	if len(b) == 0 {
		return ""
	}
	return "; log tail (" + path + "):\n" + string(b)
}

// do sends one job to the load generator and waits for its result.
func (h *harness) do(j Job) (*JobResult, error) {
	b, _ := json.Marshal(j)
	if _, err := h.loadgen.stdin.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("loadgen: %w%s", err, tail(h.loadgen.log))
	}
	var r JobResult
	if err := h.loadgen.dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("loadgen: %w%s", err, tail(h.loadgen.log))
	}
	if r.Err != "" {
		return nil, errors.New(r.Err)
	}
	return &r, nil
}

func (h *harness) job(id string, m Mode, t *target, d time.Duration) Job {
	j := Job{ID: id, Kind: m.Kind, URL: t.url, Token: h.token, Concurrency: m.Conc, Rate: m.Rate, Duration: d,
		Streams: m.Streams, Ramp: m.Ramp, Tokens: m.Tokens, Interval: m.Interval, Timeout: 15 * time.Second,
		MaxInFlight: 2048, BodyBytes: m.BodyKB << 10, StallAfter: m.StallAfter}
	if m.Kind == kindStreamConc {
		j.MaxInFlight = 0
	}
	return j
}

// warm checks each target answers, unary and streaming, and fills pools.
// A metered mode is unary only (the bench's pacing field is no control a
// budget can price), so it warms up unary requests only.
func (h *harness) warm(mode Mode) error {
	d := 300 * time.Millisecond
	if h.o.Smoke {
		d = 100 * time.Millisecond
	}
	kinds := []Mode{
		{Kind: kindClosed, Conc: 8},
		{Kind: kindStreamConc, Streams: 8, Tokens: 5, Interval: time.Millisecond},
	}
	if mode.Meter != "" {
		kinds = kinds[:1]
	}
	for _, t := range h.targets {
		for _, m := range kinds {
			r, err := h.do(h.job("warmup", m, t, d))
			if err != nil {
				return err
			}
			if r.Errors > 0 || r.Cut > 0 || r.OK == 0 {
				logs := ""
				if t.proxy != nil {
					logs = tail(t.proxy.log)
				}
				return fmt.Errorf("warm-up against %s failed: %d ok, %d errors, %d cut: %v%s", t.name, r.OK, r.Errors, r.Cut, r.ErrorSamples, logs)
			}
		}
	}
	return nil
}

// acc accumulates one target's slices of a mode.
type acc struct {
	res                       JobResult
	perSec                    []int64
	elapsed                   time.Duration
	cpuProxy, cpuUp, cpuLG    int64
	cpuStore                  int64 // redis-server's, metered redis modes
	cpuOwn                    int64
	busy, total               int64
	rssIdle                   int64
	peakProxy, peakUp, peakLG int64
	peakAnon                  int64 // the proxy's private (anonymous) RSS
}

func (h *harness) runMode(mi int, m Mode, mr *ModeResult) error {
	if err := h.startEnv(m, false); err != nil {
		return err
	}
	defer h.stopEnv()
	if err := h.warm(m); err != nil {
		return err
	}
	if !h.o.Smoke {
		mr.ForeignBefore, mr.QuietWaitSec = h.waitQuiet(5 * time.Second)
	}
	if m.Kind == kindSweep {
		return h.runSweep(mi, m, mr)
	}
	accs := h.startAccs()
	sliceDur := m.Duration / time.Duration(max(m.Slices, 1))
	for s := range max(m.Slices, 1) {
		for _, t := range h.order(mr, mi+s, s) {
			if err := h.measure(m, t, sliceDur, accs[t.name], fmt.Sprintf("%s/%d/%s", m.Name, s, t.name)); err != nil {
				return err
			}
			time.Sleep(pause(h.o.Smoke))
		}
	}
	for _, t := range h.targets {
		mr.Targets[t.name] = finish(m, t, accs[t.name])
	}
	if m.Traced {
		mr.Spans = h.traceStats()
		fmt.Fprintln(h.o.Progress, traceLine(m.Name, mr.Spans))
	}
	return nil
}

// ownPids are the processes of this run.
func (h *harness) ownPids() []int {
	pids := []int{os.Getpid()}
	for _, c := range []*child{h.loadgen, h.up, h.base, h.gw} {
		if c != nil {
			pids = append(pids, c.pid)
		}
	}
	return pids
}

// waitQuiet waits, up to limit, for a half second in which processes
// outside this run use less than a quarter of a core: on a shared machine
// a mode should not start in the middle of someone else's build. It
// returns the foreign load last seen (in cores) and the time waited.
func (h *harness) waitQuiet(limit time.Duration) (foreign, waited float64) {
	start := time.Now()
	pids := h.ownPids()
	for {
		b0, _ := machineCPU()
		c0 := cpuOf(pids)
		time.Sleep(500 * time.Millisecond)
		b1, _ := machineCPU()
		c1 := cpuOf(pids)
		var own int64
		for i := range pids {
			own += c1[i] - c0[i]
		}
		foreign = max(0, (float64(b1-b0)/clkTck-float64(own)/1e9)/0.5)
		if foreign < 0.25 || time.Since(start) >= limit {
			return foreign, time.Since(start).Seconds() - 0.5
		}
	}
}

func pause(smoke bool) time.Duration {
	if smoke {
		return 20 * time.Millisecond
	}
	return 200 * time.Millisecond
}

func rotate(ts []*target, n int) []*target {
	n %= len(ts)
	return append(slices.Clone(ts[n:]), ts[:n]...)
}

// measure runs one slice against one target, reading the CPU time and RSS
// of every process around it.
func (h *harness) measure(m Mode, t *target, d time.Duration, a *acc, id string) error {
	proxyPid := 0
	if t.proxy != nil {
		proxyPid = t.proxy.pid
	}
	// Every process of the run, so that CPU used by anything else on the
	// machine (other jobs on a shared host) shows up as foreign load.
	pids := []int{proxyPid, h.up.pid, h.loadgen.pid, os.Getpid()}
	if h.redis != nil {
		pids = append(pids, h.redis.pid)
	}
	for _, o := range h.targets {
		if o.proxy != nil && o.proxy.pid != proxyPid {
			pids = append(pids, o.proxy.pid)
		}
	}
	cpu0 := cpuOf(pids)
	b0, t0 := machineCPU()
	smp := startSampler(pids)
	r, err := h.do(h.job(id, m, t, d))
	peaks := smp.stop()
	cpu1 := cpuOf(pids)
	b1, t1 := machineCPU()
	if err != nil {
		return err
	}
	if proxyPid != 0 {
		if _, hwm, err := procStatus(proxyPid); err == nil {
			peaks[0] = max(peaks[0], hwm)
		}
	}
	a.cpuProxy += cpu1[0] - cpu0[0]
	a.cpuUp += cpu1[1] - cpu0[1]
	a.cpuLG += cpu1[2] - cpu0[2]
	if h.redis != nil {
		a.cpuStore += cpu1[4] - cpu0[4]
	}
	a.busy += b1 - b0
	a.total += t1 - t0
	for i := range pids {
		a.cpuOwn += cpu1[i] - cpu0[i]
	}
	a.peakProxy = max(a.peakProxy, peaks[0])
	a.peakAnon = max(a.peakAnon, smp.anon)
	a.peakUp = max(a.peakUp, peaks[1])
	a.peakLG = max(a.peakLG, peaks[2])
	a.elapsed += r.Elapsed
	a.perSec = append(a.perSec, r.PerSecond...)
	x := &a.res
	x.Sent += r.Sent
	x.OK += r.OK
	x.Errors += r.Errors
	x.NotSent += r.NotSent
	x.Cut += r.Cut
	x.Stalled += r.Stalled
	x.Chunks += r.Chunks
	x.PeakOpen = max(x.PeakOpen, r.PeakOpen)
	x.Latency.Merge(r.Latency)
	x.TTFB.Merge(r.TTFB)
	x.TTFT.Merge(r.TTFT)
	x.Transit.Merge(r.Transit)
	x.GapAdded.Merge(r.GapAdded)
	x.SchedLate.Merge(r.SchedLate)
	for k, v := range r.ErrorSamples {
		x.ErrorSamples[k] += v
	}
	line := fmt.Sprintf("%-16s %-9s %5.1fs ok=%d err=%d", id[:strings.IndexByte(id, '/')], t.name, r.Elapsed.Seconds(), r.OK, r.Errors)
	switch m.Kind {
	case kindClosed:
		line += fmt.Sprintf(" rps=%.0f p50=%.2fms p99=%.2fms", median(r.PerSecond), ms(r.Latency.Quantile(.5)), ms(r.Latency.Quantile(.99)))
	case kindOpen:
		line += fmt.Sprintf(" not_sent=%d p50=%.2fms p99=%.2fms", r.NotSent, ms(r.Latency.Quantile(.5)), ms(r.Latency.Quantile(.99)))
	default:
		line += fmt.Sprintf(" cut=%d ttfb_p50=%.2fms ttfb_p99=%.2fms gap_p99=%.2fms peak_open=%d", r.Cut,
			ms(r.TTFB.Quantile(.5)), ms(r.TTFB.Quantile(.99)), ms(r.GapAdded.Quantile(.99)), r.PeakOpen)
	}
	if proxyPid != 0 {
		line += fmt.Sprintf(" rss=%.1fMB", float64(peaks[0])/1024)
	}
	fmt.Fprintln(h.o.Progress, line)
	return nil
}

func cpuOf(pids []int) []int64 {
	out := make([]int64, len(pids))
	for i, p := range pids {
		if p != 0 {
			out[i] = procCPU(p)
		}
	}
	return out
}

// sampler polls VmRSS of some processes and keeps each one's peak.
type sampler struct {
	pids  []int
	peaks []int64
	anon  int64 // peak RssAnon of pids[0]
	quit  chan struct{}
	done  chan struct{}
}

func startSampler(pids []int) *sampler {
	s := &sampler{pids: pids, peaks: make([]int64, len(pids)), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tk := time.NewTicker(25 * time.Millisecond)
		defer tk.Stop()
		for {
			for i, p := range s.pids {
				if p != 0 {
					if rss, _, err := procStatus(p); err == nil {
						s.peaks[i] = max(s.peaks[i], rss)
						if i == 0 {
							s.anon = max(s.anon, procAnon(p))
						}
					}
				}
			}
			select {
			case <-s.quit:
				return
			case <-tk.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() []int64 {
	close(s.quit)
	<-s.done
	return s.peaks
}

// finish turns a target's accumulated slices into its result.
func finish(m Mode, t *target, a *acc) *TargetResult {
	x := &a.res
	tr := &TargetResult{Target: t.name, Sent: x.Sent, OK: x.OK, Errors: x.Errors, NotSent: x.NotSent, Cut: x.Cut, Stalled: x.Stalled,
		ErrorSamples: x.ErrorSamples, Seconds: a.elapsed.Seconds(), Chunks: x.Chunks, PeakOpen: x.PeakOpen,
		Latency: x.Latency.Pcts(), TTFB: x.TTFB.Pcts(), TTFT: x.TTFT.Pcts(), Transit: x.Transit.Pcts(), GapAdded: x.GapAdded.Pcts(),
		SchedLate: x.SchedLate.Pcts(), Delayed1ms: x.GapAdded.FracAbove(int64(time.Millisecond)), UpstreamRSSPeakKB: a.peakUp, LoadgenRSSPeakKB: a.peakLG,
		ProxyCPUSec: float64(a.cpuProxy) / 1e9, UpstreamCPUSec: float64(a.cpuUp) / 1e9, LoadgenCPUSec: float64(a.cpuLG) / 1e9,
		Hists: map[string]*Hist{"latency": x.Latency, "ttfb": x.TTFB, "ttft": x.TTFT, "transit": x.Transit, "gap_added": x.GapAdded}}
	if len(tr.ErrorSamples) == 0 {
		tr.ErrorSamples = nil
	}
	if tr.Seconds > 0 {
		tr.RPSMean = float64(x.OK) / tr.Seconds
	}
	if m.Kind == kindClosed || m.Kind == kindOpen {
		tr.RPS = median(a.perSec)
		if len(a.perSec) < 3 { // too short for per-second windows (smoke)
			tr.RPS = tr.RPSMean
		}
	}
	ops := x.OK
	if m.Kind == kindStreamOpen || m.Kind == kindStreamConc {
		ops = x.Chunks
	}
	if ops > 0 {
		tr.ProxyCPUPerOpUs = float64(a.cpuProxy) / 1e3 / float64(ops)
		tr.LoadgenCPUPerOpUs = float64(a.cpuLG) / 1e3 / float64(ops)
		tr.StoreCPUPerOpUs = float64(a.cpuStore) / 1e3 / float64(ops)
	}
	if a.total > 0 {
		tr.MachineBusy = float64(a.busy) / float64(a.total)
		// jiffies are 1/clkTck s summed over all CPUs
		busySec := float64(a.busy) / clkTck
		tr.ForeignCPU = max(0, (busySec-float64(a.cpuOwn)/1e9)/a.elapsed.Seconds())
	}
	if t.proxy != nil {
		tr.ProxyRSSIdleKB, tr.ProxyRSSPeakKB, tr.ProxyAnonPeakKB = a.rssIdle, a.peakProxy, a.peakAnon
		if x.PeakOpen > 0 && m.Kind == kindStreamConc {
			tr.PerStreamKB = float64(a.peakProxy-a.rssIdle) / float64(x.PeakOpen)
		}
	}
	return tr
}

// profile runs the closed-loop and concurrent-stream workloads against a
// gateway started with --pprof, saving a CPU and an allocation profile of
// each, plus `go tool pprof -top` summaries when the go tool is at hand.
func (h *harness) profile() error {
	defer h.stopEnv()
	dir := filepath.Join(h.o.Out, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	meter := "none"
	for _, m := range plan(h.o.Smoke) {
		m.fill()
		switch m.Role {
		case "closed-hi", "streams", "open-lo", "metered-sqlite", "metered-redis":
		default:
			continue
		}
		if !selected(h.o.Only, m) || feasible(m) != "" {
			continue
		}
		// One gateway per store: the metered modes need their own.
		if m.Meter != meter {
			if err := h.startEnv(m, true); err != nil {
				return err
			}
			if err := h.warm(m); err != nil {
				return err
			}
			meter = m.Meter
		}
		gw := h.targets[2]
		// Half the mode's duration in one piece, profiled but for its
		// first and last half second.
		d := max(m.Duration/2, time.Second)
		secs := max(1, int(d.Seconds())-1)
		if m.Kind == kindStreamConc {
			secs = max(1, int((m.Ramp+time.Duration(m.Tokens)*m.Interval).Seconds())-1)
		}
		type got struct {
			name string
			err  error
		}
		ch := make(chan got, 3)
		for _, p := range []string{"profile", "allocs"} {
			go func() {
				name := filepath.Join(dir, fmt.Sprintf("gateway-%s-%s.pprof", m.Name, map[string]string{"profile": "cpu", "allocs": "allocs"}[p]))
				time.Sleep(500 * time.Millisecond)
				ch <- got{name, fetch(fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", h.pprof, p, secs), name)}
			}()
		}
		n := 2
		if m.Kind == kindStreamConc {
			// The live heap and goroutines while every stream is open.
			n++
			go func() {
				time.Sleep(m.Ramp + time.Second)
				name := filepath.Join(dir, fmt.Sprintf("gateway-%s-heap.pprof", m.Name))
				err := fetch(fmt.Sprintf("http://%s/debug/pprof/heap", h.pprof), name)
				if err == nil {
					err = fetch(fmt.Sprintf("http://%s/debug/pprof/goroutine?debug=1", h.pprof),
						filepath.Join(dir, fmt.Sprintf("gateway-%s-goroutines.txt", m.Name)))
				}
				ch <- got{name, err}
			}()
		}
		if _, err := h.do(h.job("profile/"+m.Name, m, gw, d)); err != nil {
			return err
		}
		for range n {
			g := <-ch
			if g.err != nil {
				return g.err
			}
			h.report.Profiles = append(h.report.Profiles, g.name)
			summarize(h.o.Gateway, g.name)
		}
		fmt.Fprintf(h.o.Progress, "profiled gateway under %s\n", m.Name)
	}
	return nil
}

func fetch(url, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return os.WriteFile(path, b, 0o644)
}

// summarize writes `go tool pprof -top` next to a profile (best effort).
func summarize(bin, prof string) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return
	}
	args := []string{"tool", "pprof", "-top", "-nodecount=35"}
	switch {
	case strings.HasSuffix(prof, "-allocs.pprof"):
		args = append(args, "-sample_index=alloc_space")
	case strings.HasSuffix(prof, "-heap.pprof"):
		args = append(args, "-sample_index=inuse_space")
	}
	out, err := exec.Command(goTool, append(args, bin, prof)...).Output()
	if err == nil {
		_ = os.WriteFile(strings.TrimSuffix(prof, ".pprof")+".txt", out, 0o644)
	}
	if strings.HasSuffix(prof, "-allocs.pprof") {
		args[len(args)-1] = "-sample_index=alloc_objects"
		if out, err := exec.Command(goTool, append(args, bin, prof)...).Output(); err == nil {
			_ = os.WriteFile(strings.TrimSuffix(prof, ".pprof")+"-objects.txt", out, 0o644)
		}
	}
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "model name") {
			if i := strings.IndexByte(line, ':'); i >= 0 {
				return strings.TrimSpace(line[i+1:])
			}
		}
	}
	return ""
}
