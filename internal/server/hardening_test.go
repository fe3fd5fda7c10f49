package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/front"
)

// served is a Server behind Serve itself (its listener cap, its body and
// header bounds), as the binary runs it.
type served struct {
	*Server
	addr string
	logs *syncBuffer
	// stop is SIGTERM; done closes when Serve has returned.
	stop context.CancelFunc
	done chan struct{}
}

func startServed(t *testing.T, yaml string) *served {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "t.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &syncBuffer{ch: make(chan struct{}, 1)}
	s := New(slog.New(front.LogHandler{Handler: slog.NewTextHandler(logs, nil)}), nil, nil)
	s.Apply(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &served{Server: s, addr: ln.Addr().String(), logs: logs, stop: cancel, done: done}
}

// raw sends head (and any body bytes) on a new connection and returns it.
func (g *served) raw(t *testing.T, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if head != "" {
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// answerOn reads one response from c within d; ok is false when none came.
func answerOn(c net.Conn, d time.Duration) (status int, closed bool, ok bool) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, false, false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The server closes the connection after the answer: the next read
	// sees EOF at once rather than waiting for the deadline.
	_, err = br.ReadByte()
	return resp.StatusCode, err == io.EOF || resp.Close && err != nil && !isTimeout(err), true
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

const hardenYAML = `providers:
  a: {type: mock, mock: {tokens: 3}}
models:
  - name: m
    providers: [{provider: a}]
auth: {token: secret-token}
limits:
  max_request_body: 2048
  body_timeout: 0.3
`

// TestRefusalBeforeBodyAnswersAtOnce: a request refused before its body is
// read (401, 404, 405, 413) is answered at once and its connection closed,
// even when the client declared a body it never sends.
func TestRefusalBeforeBodyAnswersAtOnce(t *testing.T) {
	g := startServed(t, hardenYAML)
	tests := []struct {
		name string
		head string
		want int
	}{
		{"401 without a key", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{", 401},
		{"404 unknown path", "POST /v1/nothing HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{", 404},
		{"405 wrong method", "PUT /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret-token\r\nContent-Length: 1000\r\n\r\n{", 405},
		{"413 declared too large", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret-token\r\nContent-Length: 100000\r\n\r\n{", 413},
		{"413 chunked body over the limit", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret-token\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"1000\r\n" + strings.Repeat("x", 4096) + "\r\n", 413},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := g.raw(t, tc.head)
			status, closed, ok := answerOn(c, 3*time.Second)
			if !ok || status != tc.want || !closed {
				t.Fatalf("answer %v, status %d (want %d), connection closed %v", ok, status, tc.want, closed)
			}
		})
	}
}

// TestBodyTimeout: an authenticated body trickled too slowly is answered
// 408 once limits.body_timeout passes, and the connection closed.
func TestBodyTimeout(t *testing.T) {
	g := startServed(t, hardenYAML)
	c := g.raw(t, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret-token\r\nContent-Length: 60\r\n\r\n{")
	go func() { // one byte per 100 ms: alive, never done in time
		for range 20 {
			time.Sleep(100 * time.Millisecond)
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	status, closed, ok := answerOn(c, 3*time.Second)
	if !ok || status != http.StatusRequestTimeout || !closed {
		t.Fatalf("answer %v, status %d, closed %v; want 408 and a closed connection", ok, status, closed)
	}
	g.chatOK(t) // a body that arrives in time is served as usual
}

// chatOK asserts that an authenticated chat request is served.
func (g *served) chatOK(t *testing.T) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.addr+"/v1/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("Authorization", "Bearer secret-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat: status %d", resp.StatusCode)
	}
}

// TestMaxConnections: at limits.max_connections, /health and /ready still
// answer on spare connections, other paths get 503 at once, and
// connections beyond the spares are closed at accept instead of held.
// openConns reads the connection counts; -1 until Serve has installed its
// listener (startServed runs it on another goroutine).
func openConns(g *served) (regular, spare int64) {
	l := g.conns.Load()
	if l == nil {
		return -1, -1
	}
	return l.Open()
}

func TestMaxConnections(t *testing.T) {
	g := startServed(t, hardenYAML+"  max_connections: 3\n")
	idle := make([]net.Conn, 3)
	for i := range idle {
		idle[i] = g.raw(t, "")
	}
	waitFor(t, func() bool { n, _ := openConns(g); return n == 3 })

	for _, path := range []string{"/health", "/ready"} {
		c := g.raw(t, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		if status, closed, ok := answerOn(c, 3*time.Second); !ok || status != 200 || !closed {
			t.Fatalf("%s at the cap: answer %v, status %d, closed %v", path, ok, status, closed)
		}
	}
	c := g.raw(t, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret-token\r\nContent-Length: 2\r\n\r\n{}")
	if status, closed, ok := answerOn(c, 3*time.Second); !ok || status != 503 || !closed {
		t.Fatalf("chat at the cap: answer %v, status %d, closed %v", ok, status, closed)
	}

	// Fill the spares too: the next connection is closed by the server.
	for range spareConns {
		g.raw(t, "")
	}
	waitFor(t, func() bool { _, n := openConns(g); return n == spareConns })
	over := g.raw(t, "")
	_ = over.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a connection beyond the cap and spares was held open: %v", err)
	}

	// Below the cap again, requests are served.
	for _, c := range idle {
		c.Close()
	}
	waitFor(t, func() bool { n, _ := openConns(g); return n < 3 })
	g.chatOK(t)
}

// countingUpstream is an OpenAI-compatible upstream whose answer is made
// by serve; it counts the calls it gets.
func countingUpstream(t *testing.T, serve func(n int64, w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		serve(calls.Add(1), w, r)
	}))
	t.Cleanup(up.Close)
	return up, &calls
}

const chatAnswer = `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`

func hardenUpstreamYAML(url, extra string) string {
	return fmt.Sprintf(`providers:
  up: {type: openai, base_url: %s/v1, api_key: sk-upstream-secret-123}
models:
  - name: m
    providers: [{provider: up}]
retries: {max_attempts: 2, max_rounds: 1, backoff_base: 0.01, max_backoff: 0.05}
`, url) + extra
}

// TestPooledConnectionWaitsFromItsOwnRequest: with timeouts.read 1 s, an
// upstream taking 0.35 s and two requests 0.9 s apart on one pooled
// connection, the second must not time out early (measured from the first
// answer's end) and be sent twice.
func TestPooledConnectionWaitsFromItsOwnRequest(t *testing.T) {
	up, calls := countingUpstream(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		time.Sleep(350 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, chatAnswer)
	})
	g := startGateway(t, hardenUpstreamYAML(up.URL, "timeouts: {read: 1}\n"))
	for i := range 2 {
		if i > 0 {
			time.Sleep(900 * time.Millisecond)
		}
		if a := g.post("/v1/chat/completions", chatBody); a.Status != 200 {
			t.Fatalf("request %d: %d %s", i, a.Status, a.Body)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("upstream got %d calls for 2 requests", n)
	}
}

// TestSilentStreamIsATimeout: a stream that sends its headers and then
// nothing is a timeout of that provider (retried, counted by its breaker),
// not a client disconnect.
func TestSilentStreamIsATimeout(t *testing.T) {
	up, calls := countingUpstream(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		if n == 1 {
			<-r.Context().Done() // silent until the gateway gives up
			return
		}
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\ndata: [DONE]\n\n")
	})
	g := startGateway(t, hardenUpstreamYAML(up.URL, "timeouts: {read: 1}\n"))
	a := g.post("/v1/chat/completions", streamBody)
	if a.Status != 200 || !strings.Contains(a.Body, "[DONE]") {
		t.Fatalf("status %d: %s", a.Status, a.Body)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("upstream got %d calls, want the silent one retried once", n)
	}
	if st := g.Health.Status("up"); st.Errors != 1 {
		t.Fatalf("breaker saw %d failures, want 1", st.Errors)
	}
	m := g.get("/metrics").Body
	if !strings.Contains(m, `switchboard_provider_failure_total{model="m",provider="up",reason="timeout"} 1`) {
		t.Fatalf("failure not counted as a timeout:\n%s", grep(m, "provider_failure"))
	}
}

// TestOperatorHeadersWin: a header set in the provider or the model entry
// reaches the upstream once, with the operator's value, whatever case the
// client or the config used; a header the operator does not set passes.
func TestOperatorHeadersWin(t *testing.T) {
	got := make(chan http.Header, 1)
	up, _ := countingUpstream(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, chatAnswer)
	})
	g := startGateway(t, fmt.Sprintf(`providers:
  up:
    type: openai
    base_url: %s/v1
    api_key: sk-upstream-secret-123
    headers: {OpenAI-Organization: org-operator, openai-project: proj-operator}
models:
  - name: m
    providers:
      - provider: up
        headers: {anthropic-beta: beta-operator, OPENAI-PROJECT: proj-entry}
`, up.URL))
	a := g.post("/v1/chat/completions", chatBody, "OpenAI-Organization", "org-client", "OpenAI-Project", "proj-client",
		"anthropic-beta", "beta-client", "OpenAI-Beta", "assistants=v2")
	if a.Status != 200 {
		t.Fatalf("status %d: %s", a.Status, a.Body)
	}
	h := <-got
	want := map[string]string{"Openai-Organization": "org-operator", "Openai-Project": "proj-entry",
		"Anthropic-Beta": "beta-operator", "Openai-Beta": "assistants=v2"}
	for k, v := range want {
		if vs := h.Values(k); len(vs) != 1 || vs[0] != v {
			t.Errorf("upstream %s = %q, want only %q", k, vs, v)
		}
	}
}

// TestClientErrorsStayGeneric: a stream that fails after it started tells
// the client no addresses or internals (the log has them, under the request
// id), and an upstream error that echoes the provider key reaches the
// client with the key masked, in its body and its headers.
func TestClientErrorsStayGeneric(t *testing.T) {
	const key = "sk-upstream-secret-123"
	up, _ := countingUpstream(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "chat") {
			return
		}
		if strings.Contains(r.Header.Get("Openai-Beta"), "echo") {
			w.Header().Set("X-Echo", r.Header.Get("Authorization"))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			_, _ = fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error"}}`, r.Header.Get("Authorization"))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // then silent: the gateway's read times out
	})
	g := startGateway(t, hardenUpstreamYAML(up.URL, "timeouts: {read: 1}\n"))

	a := g.post("/v1/chat/completions", streamBody, "X-Request-Id", "req-generic-1")
	if a.Status != 200 || !strings.Contains(a.Body, "upstream_error") {
		t.Fatalf("status %d: %s", a.Status, a.Body)
	}
	for _, leak := range []string{"127.0.0.1", "i/o timeout", "tcp"} {
		if strings.Contains(a.Body, leak) {
			t.Errorf("client event leaks %q: %s", leak, a.Body)
		}
	}
	if !strings.Contains(a.Body, "req-generic-1") {
		t.Errorf("client event lacks the request id: %s", a.Body)
	}
	if logs := g.logs.String(); !strings.Contains(logs, "request_id=req-generic-1") || !strings.Contains(logs, "timeout") {
		t.Errorf("log lacks the cause under the request id:\n%s", logs)
	}

	for path, body := range map[string]string{"/v1/chat/completions": chatBody,
		"/v1/messages": `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`} {
		a = g.post(path, body, "OpenAI-Beta", "echo", "Anthropic-Version", "2023-06-01")
		if a.Status != 401 {
			t.Fatalf("%s: status %d: %s", path, a.Status, a.Body)
		}
		if strings.Contains(a.Body, key) || strings.Contains(a.Header.Get("X-Echo"), key) {
			t.Fatalf("%s: provider key reached the client: %s / %q", path, a.Body, a.Header.Get("X-Echo"))
		}
		if !strings.Contains(a.Body, "[REDACTED]") || a.Header.Get("X-Echo") != "Bearer [REDACTED]" {
			t.Fatalf("%s: not masked: %s / %q", path, a.Body, a.Header.Get("X-Echo"))
		}
	}
}

// fallbackGateway serves model m over provider bad (answered by serveBad)
// then good, and model only-bad over bad alone, one attempt each.
func fallbackGateway(t *testing.T, serveBad func(w http.ResponseWriter), extra string) (*gateway, *atomic.Int64) {
	t.Helper()
	bad, calls := countingUpstream(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		serveBad(w)
	})
	good, _ := countingUpstream(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, chatAnswer)
	})
	return startGateway(t, fmt.Sprintf(`providers:
  bad: {type: openai, base_url: %s/v1, api_key: k1}
  good: {type: openai, base_url: %s/v1, api_key: k2}
models:
  - name: m
    providers: [{provider: bad}, {provider: good}]
  - name: only-bad
    providers: [{provider: bad}]
retries: {max_attempts: 1, max_rounds: 1}
`, bad.URL, good.URL)+extra), calls
}

// fellBack asserts that provider bad failed once as bad_response and good
// served.
func fellBack(t *testing.T, g *gateway, calls *atomic.Int64) {
	t.Helper()
	a := g.post("/v1/chat/completions", chatBody)
	if a.Status != 200 || a.Header.Get("X-Switchboard-Provider") != "good" || calls.Load() != 1 {
		t.Fatalf("status %d by %q after %d calls: %.200s", a.Status, a.Header.Get("X-Switchboard-Provider"), calls.Load(), a.Body)
	}
	if m := g.get("/metrics").Body; !strings.Contains(m, `provider="bad",reason="bad_response"} 1`) {
		t.Fatalf("not counted as bad_response:\n%s", grep(m, "provider_failure"))
	}
}

// TestNonObjectAnswerFallsBack: a 200 whose JSON body is not an object is
// a bad_response of that provider, and the next one serves.
func TestNonObjectAnswerFallsBack(t *testing.T) {
	for _, bad := range []string{`[{"choices":[]}]`, `"ok"`, `null`, ` 42`} {
		t.Run(bad, func(t *testing.T) {
			g, calls := fallbackGateway(t, func(w http.ResponseWriter) { _, _ = io.WriteString(w, bad) }, "")
			fellBack(t, g, calls)
		})
	}
}

// TestBufferBudget: unary answers held in memory share one gateway-wide
// budget (limits.max_buffered_bytes); an answer that does not fit fails
// its attempt as bad_response and the next provider serves, and every
// byte is given back once the answers are relayed.
func TestBufferBudget(t *testing.T) {
	big := `{"id":"x","object":"chat.completion","pad":"` + strings.Repeat("x", 3<<20) + `","choices":[]}`
	for _, declared := range []bool{true, false} {
		t.Run(fmt.Sprintf("content-length %v", declared), func(t *testing.T) {
			g, calls := fallbackGateway(t, func(w http.ResponseWriter) {
				if !declared {
					w.(http.Flusher).Flush() // chunked: no declared length
				}
				_, _ = io.WriteString(w, big)
			}, "limits: {max_buffered_bytes: 2097152}\n")
			fellBack(t, g, calls)
			waitFor(t, func() bool { return g.proxy.Buffers.Used() == 0 }) // given back
			// Raised by reload, the same answer fits and is relayed whole.
			cfg := *g.Snapshot().Config
			cfg.Limits.MaxBufferedBytes = 8 << 20
			g.Apply(&cfg)
			a := g.post("/v1/chat/completions", strings.Replace(chatBody, `"m"`, `"only-bad"`, 1))
			if a.Status != 200 || len(a.Body) < 3<<20 {
				t.Fatalf("status %d, %d bytes", a.Status, len(a.Body))
			}
			waitFor(t, func() bool { return g.proxy.Buffers.Used() == 0 })
		})
	}
}

// streamsCounted reads switchboard_streams_total for outcome.
func streamsCounted(t *testing.T, s *Server, outcome string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, "switchboard_streams_total{") && strings.Contains(l, `outcome="`+outcome+`"`) {
			return l[strings.LastIndexByte(l, ' ')+1:]
		}
	}
	return "0"
}

const slowStreamYAML = `providers:
  slow: {type: mock, mock: {tokens: 40, tokens_per_second: 10}}
models:
  - name: m
    providers: [{provider: slow}]
`

// TestStreamTimeout: with timeouts.stream a stream still running at the
// limit is ended with an error event and counted as a timeout; without it
// (the default) the same stream completes.
func TestStreamTimeout(t *testing.T) {
	g := startGateway(t, slowStreamYAML+"timeouts: {stream: 1}\n")
	start := time.Now()
	a := g.post("/v1/chat/completions", streamBody)
	if took := time.Since(start); a.Status != 200 || !strings.Contains(a.Body, `"code":"stream_timeout"`) ||
		!strings.HasSuffix(a.Body, "data: [DONE]\n\n") || took > 3*time.Second {
		t.Fatalf("status %d after %s: %s", a.Status, took, a.Body)
	}
	if n := streamsCounted(t, g.Server, "timeout"); n != "1" {
		t.Fatalf("timeouts counted: %s", n)
	}
	if strings.Contains(g.logs.String(), "Success") {
		t.Fatalf("a timed-out stream logged Success:\n%s", g.logs.String())
	}
	if startGateway(t, slowStreamYAML).Snapshot().Config.Timeouts.Stream != 0 {
		t.Fatal("timeouts.stream is on by default")
	}
}

// TestAbandonedStreamIsNotSuccess: a stream its client walks away from is
// logged and counted as abandoned, not as a Success.
func TestAbandonedStreamIsNotSuccess(t *testing.T) {
	g := startGateway(t, slowStreamYAML)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(streamBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = bufio.NewReader(resp.Body).ReadString('\n') // the stream has started
	cancel()
	resp.Body.Close()
	waitFor(t, func() bool { return streamsCounted(t, g.Server, "abandoned") == "1" })
	logs := g.logs.String()
	if strings.Contains(logs, "Success") || !strings.Contains(logs, "Stream abandoned") {
		t.Fatalf("abandoned stream logged as:\n%s", logs)
	}
}

// TestDrainCutStreamIsCounted: a stream still running when the shutdown
// drain bound passes is cut, and logged and counted as cut.
func TestDrainCutStreamIsCounted(t *testing.T) {
	g := startServed(t, slowStreamYAML+"timeouts: {shutdown: 0.3}\n")
	resp, err := http.Post("http://"+g.addr+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = bufio.NewReader(resp.Body).ReadString('\n')
	g.stop() // SIGTERM
	<-g.done
	waitFor(t, func() bool { return streamsCounted(t, g.Server, "cut") == "1" })
	logs := g.logs.String()
	if strings.Contains(logs, "Success") || !strings.Contains(logs, "Stream cut") {
		t.Fatalf("cut stream logged as:\n%s", logs)
	}
}

// TestRefusalReachesAClientStillSending: a client still sending a large
// body gets the refusal, not a reset (the connection is half-closed first,
// through the listener cap's wrapper too).
func TestRefusalReachesAClientStillSending(t *testing.T) {
	g := startServed(t, hardenYAML)
	big := strings.Repeat("x", 4<<20)
	for i := range 10 {
		for _, auth := range []string{"", "Bearer secret-token"} {
			req, _ := http.NewRequest(http.MethodPost, "http://"+g.addr+"/v1/chat/completions", strings.NewReader(big))
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
			if err != nil {
				t.Fatalf("try %d (auth %q): no answer: %v", i, auth, err)
			}
			resp.Body.Close()
			if want := map[string]int{"": 401, "Bearer secret-token": 413}[auth]; resp.StatusCode != want {
				t.Fatalf("try %d: status %d, want %d", i, resp.StatusCode, want)
			}
		}
	}
}

// TestLongPathIsBounded: a request line of hundreds of KB (within
// net/http's 1 MB header limit) is neither echoed whole in the error nor
// written whole to the access log, with or without a key.
func TestLongPathIsBounded(t *testing.T) {
	g := startServed(t, `providers: {a: {type: mock}}
models: [{name: m, providers: [{provider: a}]}]
auth:
  admin_token: adm-token
  keys: {sk-t: {tenant: t}}
`)
	long := strings.Repeat("a", 300<<10)
	tests := []struct {
		method, path, key, body string
		status                  int
	}{
		{"GET", "/" + long, "", "", 404},
		{"GET", "/v1/" + long, "sk-t", "", 404},
		{"GET", "/admin/v1/keys/" + long, "adm-token", "", 404},
		{"POST", "/admin/v1/keys/" + long + "/rotate", "adm-token", "", 404},
		{"PATCH", "/admin/v1/tenants/" + long, "adm-token", `{"rpm":1}`, 404},
		{"PUT", "/admin/v1/keys/" + long, "adm-token", "", 405},
		{"POST", "/v1/chat/completions", "sk-t", `{"model":"` + long + `","messages":[{"role":"user","content":"hi"}]}`, 404},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, "http://"+g.addr+tt.path, strings.NewReader(tt.body))
		if tt.key != "" {
			req.Header.Set("Authorization", "Bearer "+tt.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || len(b) > 2048 || !strings.Contains(string(b), fmt.Sprintf("(%d bytes)", len(long))) &&
			!strings.Contains(string(b), fmt.Sprintf("(%d bytes)", len(tt.path))) {
			t.Errorf("%s %.40s: %d, %d bytes: %.200s", tt.method, tt.path, resp.StatusCode, len(b), b)
		}
	}
	for _, line := range strings.Split(g.logs.String(), "\n") {
		if len(line) > 4096 {
			t.Errorf("a log line of %d bytes: %.200s", len(line), line)
		}
	}
}
