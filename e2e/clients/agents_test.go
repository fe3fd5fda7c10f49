//go:build clients

package clients

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchboard/e2e/upstream"
)

// agentDeadline bounds one agent run (SWITCHBOARD_AGENT_DEADLINE, a Go
// duration, overrides it). A working tool loop takes 2 to 10 s on an idle
// machine; a failing cell usually ends at the first refusal, but an agent
// that retries 5xx answers (Gemini CLI: up to 10 attempts) runs into this.
var agentDeadline = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SWITCHBOARD_AGENT_DEADLINE")); err == nil && d > 0 {
		return d
	}
	return 120 * time.Second
}()

// prompt is tiny on purpose: the fake model does not read it, and the
// agents add their own system prompts anyway.
const prompt = "Read marker.txt and tell me the marker."

// agentEnv is what one agent run is given.
type agentEnv struct {
	bin    string // node_modules/.bin
	home   string // its isolated HOME
	work   string // its working directory, holding marker.txt
	base   string // the API root it is pointed at (the gateway, or a fake)
	key    string
	env    []string // the common environment (PATH, proxies, TMPDIR...)
	direct bool     // pointed at the fake vendor API itself, no gateway
}

// agentRun is what an agent did.
type agentRun struct {
	answer string // its final answer, "" if none
	failed string // why it failed, in its own words, "" if it did not
	took   time.Duration
}

// agentSpec is one coding agent.
type agentSpec struct {
	name   string
	vendor upstream.Vendor // the protocol it speaks
	models []string        // the model names it sends
	run    func(ctx context.Context, e agentEnv) agentRun
}

var agents = []agentSpec{
	{name: "claude-code", vendor: upstream.Anthropic, models: []string{claudeModel}, run: runClaude},
	// Without a model flag Gemini CLI routes: a generateContent call to
	// the flash-lite model classifies the prompt, then the main turn
	// streams from pro or flash. Every name it may send is routed.
	{name: "gemini-cli", vendor: upstream.Gemini, models: geminiModels, run: runGemini},
	{name: "codex", vendor: upstream.OpenAI, models: []string{codexModel}, run: runCodex},
}

// marker is a fresh random marker the fake model must find in a tool result.
func marker() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "SBX-" + hex.EncodeToString(b)
}

// agentTools are the tool calls the fake model asks for, one per agent's
// own file-reading tool (the fake picks the one the request offers).
func agentTools(work string) []upstream.ToolCall {
	path := filepath.Join(work, "marker.txt")
	return []upstream.ToolCall{
		{Name: "Read", Args: map[string]any{"file_path": path}},                                // Claude Code
		{Name: "read_file", Args: map[string]any{"file_path": path}},                           // Gemini CLI
		{Name: "exec_command", Args: map[string]any{"cmd": "cat marker.txt", "workdir": work}}, // Codex
	}
}

// TestAgents runs each agent against a fake of its own vendor directly
// (the control: the fake and the harness are sound), then through the
// gateway against each provider type: its own protocol (native
// pass-through) and the two others (translated). Each run is a two-turn
// tool loop: the model asks the agent to read marker.txt, the agent runs
// its tool and sends the result back, and the model's answer quotes the
// marker.
func TestAgents(t *testing.T) {
	bin, err := agentBin()
	for _, a := range agents {
		for _, target := range []string{"direct", "anthropic", "openai", "gemini"} {
			a, target := a, target
			t.Run(a.name+"/"+target, func(t *testing.T) {
				t.Parallel()
				if err != nil {
					cell(t, "tool-loop", func(t *testing.T) error { return fmt.Errorf("agents not installed: %v", err) })
					return
				}
				agentCells(t, bin, a, target)
			})
		}
	}
}

// agentCells runs agent a once against target and judges the cells of
// that run.
func agentCells(t *testing.T, bin string, a agentSpec, target string) {
	dir := t.TempDir()
	e := agentEnv{bin: bin, home: filepath.Join(dir, "home"), work: filepath.Join(dir, "work"), key: gatewayKey}
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{e.home, e.work, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m := marker()
	if err := os.WriteFile(filepath.Join(e.work, "marker.txt"), []byte("the marker is "+m+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vendor := upstream.Vendor(target)
	if target == "direct" {
		vendor = a.vendor
	}
	up := upstream.New(vendor, upstream.Options{Key: upstreamKey, Tools: agentTools(e.work)})
	t.Cleanup(up.Close)
	var g *gateway
	if target == "direct" {
		e.base, e.key, e.direct = up.URL, upstreamKey, true
	} else {
		var routes []route
		for _, model := range a.models {
			routes = append(routes, route{model: model, up: up})
		}
		var err error
		if g, err = startGateway(t, routes); err != nil {
			cell(t, "tool-loop", func(t *testing.T) error { return err })
			return
		}
		e.base = g.URL
	}
	outside := newOutside()
	t.Cleanup(outside.Close)
	e.env = baseEnv(tmp, outside.URL)

	ctx, cancel := context.WithTimeout(context.Background(), agentDeadline)
	defer cancel()
	start := time.Now()
	run := a.run(ctx, e)
	run.took = time.Since(start)
	if ctx.Err() != nil && run.failed == "" {
		run.failed = fmt.Sprintf("no answer within %s", agentDeadline)
	}
	t.Logf("%s against %s: %.1fs, answer %q, failure %q", a.name, target, run.took.Seconds(), run.answer, run.failed)
	if g != nil {
		for _, x := range g.tap.Exchanges() {
			t.Logf("client: %s", x)
		}
	}
	for _, r := range up.Requests() {
		t.Logf("upstream: %s %s?%s -> %d %s", r.Method, r.Path, r.Query, r.Status, r.Answer)
	}
	if hosts := outside.Hosts(); len(hosts) > 0 {
		t.Logf("%s tried to reach outside hosts: %v", a.name, hosts)
	}
	dump(t, g, up)

	timedCell(t, "tool-loop", run.took, func(t *testing.T) error {
		want := "The tool said " + m
		if strings.Contains(run.answer, want) {
			return nil
		}
		why := run.failed
		if why == "" {
			why = fmt.Sprintf("answered %q, not %q", oneLine(run.answer, 200), want)
		}
		calls := upstreamCalls(up)
		if g != nil {
			calls = clientCalls(g) + "; " + calls
		}
		return fmt.Errorf("%s: %s [%s]", a.name, oneLine(why, 400), calls)
	})
	if target == "direct" {
		cell(t, "offline", func(t *testing.T) error {
			if hosts := outside.Hosts(); len(hosts) > 0 {
				return fmt.Errorf("%s tried to reach %v despite its telemetry and update switches", a.name, hosts)
			}
			return nil
		})
	}
	if target == string(a.vendor) {
		cell(t, "passthrough", func(t *testing.T) error { return checkPassthrough(g, up) })
	}
}

// baseEnv is the environment every agent starts from: nothing of the
// test's own but PATH, a private TMPDIR, and every proxy variable pointed
// at a recorder that refuses all, so an agent reaches nothing but
// loopback.
func baseEnv(tmp, proxy string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp, "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1",
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		env = append(env, k+"="+proxy)
	}
	return env
}

// outside is a proxy that refuses every request and keeps the hosts asked
// for: what an agent would have sent off the machine.
type outside struct {
	*httptest.Server
	mu    sync.Mutex
	hosts map[string]bool
}

func newOutside() *outside {
	o := &outside{hosts: map[string]bool{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.hosts[r.Host] = true
		o.mu.Unlock()
		http.Error(w, "no network in the client matrix", http.StatusForbidden)
	}))
	return o
}

func (o *outside) Hosts() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var l []string
	for h := range o.hosts {
		l = append(l, h)
	}
	sort.Strings(l)
	return l
}

// execAgent runs one agent process in e.work with env; stdin is empty.
// The agent gets a process group of its own: at the deadline the whole
// group is killed (codex's node wrapper, its Rust binary and the shells it
// runs), and whatever the agent left running when it exited goes too.
func execAgent(ctx context.Context, e agentEnv, env []string, name string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, name), args...)
	cmd.Dir, cmd.Env = e.work, append(append([]string{}, e.env...), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var o, s bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &s
	err = cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return o.String(), s.String(), err
}

// checkPassthrough checks what the native path promises: the first
// inference request reached the upstream with every field as the client
// sent it but model (rewritten to the provider's model name), the vendor's
// version and beta headers kept, and the client's own key replaced by the
// provider's.
func checkPassthrough(g *gateway, up *upstream.Server) error {
	inference := func(path string) bool {
		return strings.HasSuffix(path, "/messages") || strings.HasSuffix(path, "/responses") ||
			strings.Contains(path, ":generateContent") || strings.Contains(path, ":streamGenerateContent")
	}
	var sent *exchange
	for _, x := range g.tap.Exchanges() {
		if x.Method == http.MethodPost && inference(x.Path) {
			sent = &x
			break
		}
	}
	if sent == nil {
		return errors.New("the client sent no inference request")
	}
	var got *upstream.Request
	for _, r := range up.Requests() {
		if r.Method == http.MethodPost && inference(r.Path) {
			got = &r
			break
		}
	}
	if got == nil {
		return fmt.Errorf("%s reached no upstream [%s]", sent, upstreamCalls(up))
	}
	for _, r := range up.Requests() {
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, gatewayKey) {
					return fmt.Errorf("the client's key reached the upstream in %s", k)
				}
			}
		}
	}
	var a, b map[string]any
	if err := json.Unmarshal(sent.Body, &a); err != nil {
		return fmt.Errorf("client body: %v", err)
	}
	if err := json.Unmarshal(got.Body, &b); err != nil {
		return fmt.Errorf("upstream body: %v", err)
	}
	want := upstreamModel[up.Vendor()]
	if up.Vendor() == upstream.Gemini {
		if !strings.Contains(got.Path, "/models/"+want+":") {
			return fmt.Errorf("upstream path %s does not name the provider's model %s", got.Path, want)
		}
	} else if b["model"] != want {
		return fmt.Errorf("upstream model %v, want the provider's %s", b["model"], want)
	}
	delete(a, "model")
	delete(b, "model")
	var diff []string
	for k := range a {
		if !reflect.DeepEqual(a[k], b[k]) {
			diff = append(diff, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			diff = append(diff, "+"+k)
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		return fmt.Errorf("fields changed on the way upstream: %s (the rest passed unchanged)", strings.Join(diff, ", "))
	}
	for _, h := range []string{"Anthropic-Version", "Anthropic-Beta"} {
		if v := sent.Header.Get(h); v != "" && got.Header.Get(h) != v {
			return fmt.Errorf("header %s: client sent %q, upstream got %q", h, v, got.Header.Get(h))
		}
	}
	return nil
}
