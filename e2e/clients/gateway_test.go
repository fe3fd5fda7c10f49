//go:build clients

package clients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchboard/e2e/upstream"
)

// Keys: clients hold the gateway key; the gateway holds one key per
// upstream. A same-protocol cell checks that the client's key never
// reaches the upstream.
const (
	gatewayKey  = "sk-gw-client-key"
	upstreamKey = "up-provider-key"
)

// Upstream model names, one per provider type: the fakes see these.
var upstreamModel = map[upstream.Vendor]string{
	upstream.Anthropic: "claude-opus-4-6",
	upstream.OpenAI:    "gpt-5.5",
	upstream.Gemini:    "gemini-3.1-pro-preview",
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
	tmpRoot string
)

// cleanup removes what the run left in the temp dir (called by TestMain).
func cleanup() {
	if tmpRoot != "" {
		os.RemoveAll(tmpRoot)
	}
}

// repoRoot is the module root (two levels up from this package).
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// gatewayBinary builds ./cmd/switchboard once per run, as the container
// test builds it (static, -trimpath), so the suite's earlier steps leave
// its packages in the build cache. SWITCHBOARD_GATEWAY_BIN names a binary
// to use instead (one built from another tree, say).
func gatewayBinary() (string, error) {
	binOnce.Do(func() {
		if p := os.Getenv("SWITCHBOARD_GATEWAY_BIN"); p != "" {
			binPath, binErr = filepath.Abs(p)
			return
		}
		dir, err := os.MkdirTemp("", "switchboard-clients-")
		if err != nil {
			binErr = err
			return
		}
		tmpRoot = dir
		binPath = filepath.Join(dir, "switchboard")
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		cmd := exec.Command(goTool, "build", "-trimpath", "-o", binPath, "./cmd/switchboard")
		cmd.Dir, cmd.Env = repoRoot(), append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/switchboard: %v\n%s", err, out)
		}
	})
	return binPath, binErr
}

// route sends one gateway model to one fake upstream.
type route struct {
	model string // the name clients send
	up    *upstream.Server
}

// gateway is one switchboard process and the tap in front of it.
type gateway struct {
	URL  string // the tap's URL: what clients are given
	tap  *tap
	logs *lockedBuffer
}

// gatewayConfig is the YAML for routes: one provider per upstream, each
// model served by exactly one of them. Retries, the breaker and probing
// are off so that a cell's failure is quick and its reason the first one.
func gatewayConfig(routes []route) string {
	var b strings.Builder
	b.WriteString("providers:\n")
	names := map[*upstream.Server]string{}
	for _, r := range routes {
		if _, ok := names[r.up]; ok {
			continue
		}
		name := fmt.Sprintf("%s-up%d", r.up.Vendor(), len(names)+1)
		names[r.up] = name
		fmt.Fprintf(&b, "  %s: {type: %s, base_url: %q, api_key: %q}\n", name, r.up.Vendor(), r.up.BaseURL(), upstreamKey)
	}
	b.WriteString("models:\n")
	for _, r := range routes {
		fmt.Fprintf(&b, "  - name: %q\n    providers: [{provider: %s, model: %q}]\n", r.model, names[r.up], upstreamModel[r.up.Vendor()])
	}
	fmt.Fprintf(&b, `auth: {token: %q}
store: {backend: memory}
usage_log: {enabled: false}
retries: {max_attempts: 1, max_rounds: 1}
health: {breaker: {threshold: 0}}
performance: {probing_enabled: false, config_poll_interval: 0}
metrics: {tps_log: {interval: 0}}
logging: {level: debug, format: json}
timeouts: {request: 60}
`, gatewayKey)
	return b.String()
}

// startGateway runs the gateway binary with a config for routes and waits
// until it listens; it is stopped when t ends.
func startGateway(t *testing.T, routes []route) (*gateway, error) {
	bin, err := gatewayBinary()
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(gatewayConfig(routes)), 0o600); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "STATE_DIR=" + filepath.Join(dir, "state")}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	logs := &lockedBuffer{limit: 1 << 20}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			logs.WriteString(line + "\n")
			var l struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "switchboard listening" {
				select {
				case addr <- l.Addr:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	exited := make(chan struct{})
	go func() { cmd.Wait(); pw.Close(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("gateway log (tail):\n%s", tail(logs.String(), 4000))
		}
	})
	select {
	case a := <-addr:
		tp := newTap("http://" + a)
		t.Cleanup(tp.Close)
		return &gateway{URL: tp.URL, tap: tp, logs: logs}, nil
	case <-exited:
		return nil, fmt.Errorf("the gateway exited at start: %s", tail(logs.String(), 2000))
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("the gateway did not listen within 30s: %s", tail(logs.String(), 2000))
	}
}

// lockedBuffer is a bounded log shared by a reader goroutine and the test.
type lockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	limit int
}

func (l *lockedBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len()+len(s) > l.limit {
		return
	}
	l.b.WriteString(s)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// exchange is one client request as the tap saw it.
type exchange struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte // the request body
	Status              int
	Answer              []byte // the start of the answer's body
}

// String is "POST /v1/messages?beta=true -> 400 {...}".
func (e exchange) String() string {
	s := e.Method + " " + e.Path
	if e.Query != "" {
		s += "?" + e.Query
	}
	s += fmt.Sprintf(" -> %d", e.Status)
	if e.Status >= 300 && len(e.Answer) > 0 {
		s += " " + oneLine(string(e.Answer), 300)
	}
	return s
}

// tap is a transparent reverse proxy in front of the gateway that keeps
// what clients sent (method, path, query, headers, body) and what they got
// (status, the start of the body): what a cell reports when it fails, and
// what tells the wiring which endpoints and fields real clients use.
// Exchanges are kept in the order they arrived, as they arrive: a stream
// still open when a cell is judged is there, its status 0 until headers.
type tap struct {
	*httptest.Server
	mu  sync.Mutex
	log []*exchange
}

const (
	tapBodyLimit   = 4 << 20
	tapAnswerLimit = 2048
	tapKept        = 200
)

func newTap(target string) *tap {
	u, _ := url.Parse(target)
	tp := &tap{}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
		FlushInterval: -1, // streams reach the client event by event
		ModifyResponse: func(resp *http.Response) error {
			ex, _ := resp.Request.Context().Value(tapKey{}).(*exchange)
			if ex == nil {
				return nil
			}
			tp.mu.Lock()
			ex.Status = resp.StatusCode
			tp.mu.Unlock()
			resp.Body = &answerTee{ReadCloser: resp.Body, ex: ex, tp: tp}
			return nil
		},
	}
	tp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, tapBodyLimit))
		r.Body = io.NopCloser(bytes.NewReader(body))
		ex := &exchange{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
		tp.mu.Lock()
		if len(tp.log) < tapKept {
			tp.log = append(tp.log, ex)
		}
		tp.mu.Unlock()
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tapKey{}, ex)))
	}))
	return tp
}

type tapKey struct{}

// answerTee keeps the start of an answer's body while it is relayed.
type answerTee struct {
	io.ReadCloser
	ex *exchange
	tp *tap
}

func (a *answerTee) Read(p []byte) (int, error) {
	n, err := a.ReadCloser.Read(p)
	a.tp.mu.Lock()
	if room := tapAnswerLimit - len(a.ex.Answer); room > 0 && n > 0 {
		a.ex.Answer = append(a.ex.Answer, p[:min(n, room)]...)
	}
	a.tp.mu.Unlock()
	return n, err
}

// Exchanges returns a copy of what the tap saw, in arrival order.
func (tp *tap) Exchanges() []exchange {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	out := make([]exchange, len(tp.log))
	for i, ex := range tp.log {
		out[i] = *ex
		out[i].Answer = append([]byte(nil), ex.Answer...)
	}
	return out
}

// summary lists exchanges one per line, for a failure's reason.
func summary(label string, ex []string) string {
	if len(ex) == 0 {
		return label + ": none"
	}
	if len(ex) > 6 {
		ex = append(ex[:3:3], fmt.Sprintf("(%d more)", len(ex)-6), ex[len(ex)-3], ex[len(ex)-2], ex[len(ex)-1])
	}
	return label + ": " + strings.Join(ex, "; ")
}

func clientCalls(g *gateway) string {
	var l []string
	for _, e := range g.tap.Exchanges() {
		l = append(l, e.String())
	}
	return summary("client calls", l)
}

func upstreamCalls(ups ...*upstream.Server) string {
	var l []string
	for _, u := range ups {
		for _, r := range u.Requests() {
			s := fmt.Sprintf("%s %s %s", u.Vendor(), r.Method, r.Path)
			if r.Query != "" {
				s += "?" + r.Query
			}
			l = append(l, fmt.Sprintf("%s -> %d", s, r.Status))
		}
	}
	return summary("upstream calls", l)
}

// dumpDir, when set, receives every exchange of every cell: what the
// client sent the gateway and what the upstream received, request line,
// headers and body, one file each (for the wiring of new protocols).
var dumpDir = flag.String("dump", os.Getenv("SWITCHBOARD_CLIENTS_DUMP"), "write each cell's requests (client and upstream) under this directory")

func dump(t *testing.T, g *gateway, ups ...*upstream.Server) {
	if *dumpDir == "" {
		return
	}
	dir := filepath.Join(*dumpDir, strings.ReplaceAll(strings.SplitN(t.Name(), "/", 2)[1], "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Log(err)
		return
	}
	write := func(name, line string, h http.Header, body, answer []byte) {
		var b bytes.Buffer
		b.WriteString(line + "\n")
		h.Write(&b)
		b.WriteString("\n")
		b.Write(body)
		if len(answer) > 0 {
			b.WriteString("\n\n--- answer (start) ---\n")
			b.Write(answer)
		}
		os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644)
	}
	if g != nil {
		for i, x := range g.tap.Exchanges() {
			write(fmt.Sprintf("%02d-client.txt", i+1), x.String(), x.Header, x.Body, x.Answer)
		}
	}
	for _, u := range ups {
		for i, r := range u.Requests() {
			write(fmt.Sprintf("%02d-upstream-%s.txt", i+1, u.Vendor()), fmt.Sprintf("%s %s?%s -> %d", r.Method, r.Path, r.Query, r.Status), r.Header, r.Body, r.Answer)
		}
	}
}
