package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// Real replicas: the test binary re-executes itself as the switchboard
// binary (TestMain in crash_test.go), so a test can kill -9 or SIGSTOP a
// worker process exactly as an operator's crash or a stalled VM would.

const replicaEnv = "SWITCHBOARD_TEST_SERVE"

// proc is one switchboard process.
type proc struct {
	cmd  *exec.Cmd
	URL  string
	name string
	mu   sync.Mutex
	log  strings.Builder
	done chan struct{}
	addr chan string // its listen address, once it logs it
}

var listenRe = regexp.MustCompile(`switchboard listening"? addr=(\S+)`)

// startProc runs `switchboard serve` with yaml and role, and waits until
// it listens.
func startProc(t *testing.T, name, yaml, role string) *proc {
	t.Helper()
	p := launchProc(t, name, yaml, t.TempDir(), "--role", role)
	p.waitListening(t)
	return p
}

// launchProc runs `switchboard serve` with yaml (written to a new
// directory) on stateDir, with args added, and returns at once.
func launchProc(t *testing.T, name, yaml, stateDir string, args ...string) *proc {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), replicaEnv+"=1", "STATE_DIR="+stateDir)
	stderr, _ := cmd.StderrPipe()
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, name: name, done: make(chan struct{}), addr: make(chan string, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if testing.Verbose() {
				fmt.Fprintf(os.Stderr, "[%s] %s\n", name, line)
			}
			if m := listenRe.FindStringSubmatch(line); m != nil {
				p.addr <- m[1]
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitListening waits until p listens, and sets p.URL.
func (p *proc) waitListening(t *testing.T) {
	t.Helper()
	select {
	case a := <-p.addr:
		p.URL = "http://" + a
	case <-p.done:
		t.Fatalf("%s exited: %s", p.name, p.logs())
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not start: %s", p.name, p.logs())
	}
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *proc) signal(sig syscall.Signal) {
	_ = p.cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		<-p.done
	}
}

// upstream is an OpenAI-compatible provider the test controls. The
// request's prompt names its behaviour and a unique id; the worker's
// provider header X-Worker names who called.
type upstream struct {
	*httptest.Server
	mu sync.Mutex
	// calls: id -> the workers that called, in order; ok: id -> answers
	// completed; gone: id -> when the caller disconnected.
	calls map[string][]string
	ok    map[string]int
	gone  map[string]time.Time
	seen  chan string // "id worker" per call
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{calls: map[string][]string{}, ok: map[string]int{}, gone: map[string]time.Time{}, seen: make(chan string, 4096)}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

var promptRe = regexp.MustCompile(`(\w+):(\w+)`)

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	prompt := gjson.GetBytes(body, "messages.0.content").String()
	m := promptRe.FindStringSubmatch(prompt)
	if m == nil {
		http.Error(w, `{"error":{"message":"no marker"}}`, 400)
		return
	}
	mode, id, worker := m[1], m[2], r.Header.Get("X-Worker")
	u.mu.Lock()
	u.calls[id] = append(u.calls[id], worker)
	n := len(u.calls[id])
	u.mu.Unlock()
	u.seen <- id + " " + worker
	flaky := strings.Contains(r.URL.Path, "/flaky/")
	if flaky && n%3 == 1 { // every first of three attempts at the flaky provider fails
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		io.WriteString(w, `{"error":{"message":"flaky"}}`)
		return
	}
	wait := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-r.Context().Done():
			u.mu.Lock()
			u.gone[id] = time.Now()
			u.mu.Unlock()
			return false
		}
	}
	switch mode {
	case "slow", "slowstream":
		if !wait(1500 * time.Millisecond) {
			return
		}
	case "hang":
		wait(time.Minute)
		return
	case "hangonce": // the first call hangs (its caller is killed), later ones answer
		if n == 1 {
			wait(time.Minute)
			return
		}
	}
	content := "answer " + id + " by " + worker
	if mode == "partial" { // one token, then silence until the caller leaves
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"first\"}}]}\n\n")
		w.(http.Flusher).Flush()
		wait(time.Minute)
		return
	}
	if gjson.GetBytes(body, "stream").Bool() {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i, word := range strings.Fields(content) {
			if i > 0 {
				word = " " + word
			}
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", word)
			fl.Flush()
		}
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	} else {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":4,"total_tokens":5}}`, content)
	}
	u.mu.Lock()
	u.ok[id]++
	u.mu.Unlock()
}

// waitCall returns the worker that called for id.
func (u *upstream) waitCall(t *testing.T, id string, nth int) string {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		u.mu.Lock()
		c := u.calls[id]
		u.mu.Unlock()
		if len(c) >= nth {
			return c[nth-1]
		}
		select {
		case <-u.seen:
		case <-deadline:
			t.Fatalf("upstream never saw call %d of %s", nth, id)
		}
	}
}

// queueYAML serves models m (steady a, then flaky) and f (flaky first)
// over the test upstream; worker names the X-Worker header.
func queueYAML(redisURL, upstreamURL, worker, extra string) string {
	return queueYAMLAt(fmt.Sprintf("url: %q", redisURL), upstreamURL, worker, extra)
}

// queueYAMLAt is queueYAML with redisFields (a flow mapping's fields) as
// the redis section's location.
func queueYAMLAt(redisFields, upstreamURL, worker, extra string) string {
	return fmt.Sprintf(`providers:
  a: {base_url: "%[2]s/a/v1", api_key: k, headers: {X-Worker: "%[3]s"}}
  flaky: {base_url: "%[2]s/flaky/v1", api_key: k, headers: {X-Worker: "%[3]s"}}
models:
  - name: m
    providers: [{provider: a}, {provider: flaky}]
  - name: f
    providers: [{provider: flaky}, {provider: a}]
retries: {max_attempts: 2, max_rounds: 2, backoff_base: 0.01, max_backoff: 0.05}
performance: {probing_enabled: false, config_poll_interval: 0}
timeouts: {request: 30}
redis: {%[1]s, command_timeout: 2}
queue:
  mode: redis
  lease: 2
  origin_lease: 2
%[4]s`, redisFields, upstreamURL, worker, extra)
}

var procClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 100}}

func chat(ctx context.Context, url, model, prompt string, stream bool) (int, string, error) {
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":%q}]}`, model, stream, prompt)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := procClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// content is the answer text of a unary body or an SSE stream.
func content(body string) string {
	if !strings.HasPrefix(body, "data:") {
		return gjson.Get(body, "choices.0.message.content").String()
	}
	var b strings.Builder
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
			b.WriteString(gjson.Get(d, "choices.0.delta.content").String())
		}
	}
	return b.String()
}
