package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// errShape decodes the OpenAI error envelope.
type errShape struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func TestErrorShapes(t *testing.T) {
	yaml := mockYAML("m", "a") + "auth: {token: secret-token}\nlimits: {max_request_body: 2048}\n"
	g := startGateway(t, yaml)
	auth := []string{"Authorization", "Bearer secret-token"}
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}]}`
	tests := []struct {
		name     string
		method   string
		path     string
		body     string
		headers  []string
		status   int
		code     string
		typ      string
		contains string
	}{
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"nope","messages":[]}`, auth, 404, "model_not_found", "invalid_request_error", `"nope"`},
		{"malformed json", "POST", "/v1/chat/completions", `{"model":"m",`, auth, 400, "invalid_request", "invalid_request_error", "not valid JSON"},
		{"not an object", "POST", "/v1/chat/completions", `[1,2]`, auth, 400, "invalid_request", "invalid_request_error", "JSON object"},
		{"missing model", "POST", "/v1/chat/completions", `{"messages":[]}`, auth, 400, "invalid_request", "invalid_request_error", `"model"`},
		{"model not a string", "POST", "/v1/chat/completions", `{"model":7}`, auth, 400, "invalid_request", "invalid_request_error", `"model"`},
		{"duplicate model key", "POST", "/v1/chat/completions", `{"model":"m","messages":[],"model":"other"}`, auth, 400, "invalid_request", "invalid_request_error", "duplicate key"},
		{"body too large", "POST", "/v1/chat/completions", big, auth, 413, "request_too_large", "invalid_request_error", "max_request_body"},
		{"wrong method", "GET", "/v1/chat/completions", "", auth, 405, "method_not_allowed", "invalid_request_error", "POST"},
		{"missing token", "POST", "/v1/chat/completions", `{"model":"m"}`, nil, 401, "invalid_api_key", "authentication_error", "API key"},
		{"wrong token", "POST", "/v1/chat/completions", `{"model":"m"}`, []string{"Authorization", "Bearer nope"}, 401, "invalid_api_key", "authentication_error", "API key"},
		{"unknown route", "GET", "/v1/nothing", "", auth, 404, "not_found", "invalid_request_error", "/v1/nothing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, g.URL+tc.path, strings.NewReader(tc.body))
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			a := g.do(req)
			if a.Status != tc.status {
				t.Fatalf("status = %d, want %d; body %s", a.Status, tc.status, a.Body)
			}
			var e errShape
			if err := json.Unmarshal([]byte(a.Body), &e); err != nil {
				t.Fatalf("body is not the OpenAI error shape: %v: %s", err, a.Body)
			}
			if e.Error.Code == nil || *e.Error.Code != tc.code || e.Error.Type != tc.typ {
				t.Errorf("code/type = %v/%q, want %q/%q", e.Error.Code, e.Error.Type, tc.code, tc.typ)
			}
			if !strings.Contains(e.Error.Message, tc.contains) {
				t.Errorf("message %q does not mention %q", e.Error.Message, tc.contains)
			}
			if a.Header.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id on the error")
			}
		})
	}
	// x-api-key works as well as Bearer.
	if a := g.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "secret-token"); a.Status != 200 {
		t.Fatalf("x-api-key: status %d %s", a.Status, a.Body)
	}
	// /health stays public.
	if a := g.get("/health"); a.Status != 200 || a.Body != `{"status":"ok"}` {
		t.Fatalf("/health = %d %s", a.Status, a.Body)
	}
}

// upstream is an httptest OpenAI-compatible server recording what it got.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
	bodies  []string
}

func newUpstream(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body []byte)) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.headers = append(u.headers, r.Header.Clone())
		u.bodies = append(u.bodies, string(b))
		u.mu.Unlock()
		h(w, r, b)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) last() (http.Header, string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.bodies) == 0 {
		return nil, ""
	}
	return u.headers[len(u.headers)-1], u.bodies[len(u.bodies)-1]
}

func okChat(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Ratelimit-Remaining-Requests", "99")
	fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
		gjson.GetBytes(body, "model").String())
}

func upstreamYAML(name, url, extra string) string {
	return fmt.Sprintf(`providers:
  %s:
    base_url: %s
    api_key: upstream-key
    headers: {X-Provider-Header: p, X-Shared: from-provider}
models:
  - name: m
    providers:
      - provider: %s
        model: upstream-model
        headers: {X-Shared: from-entry}
%s`, name, url, name, extra)
}

func TestBodyRewritePreservesEveryOtherByte(t *testing.T) {
	u := newUpstream(t, okChat)
	g := startGateway(t, upstreamYAML("up", u.URL, ""))
	tests := []struct{ name, in, want string }{
		{"unknown fields and spacing kept",
			`{"model":"m", "messages":[{"role":"user","content":"hé \u00e9"}],"x_custom":{"nested":[1,2.50,true]},  "temperature":0.70}`,
			`{"model":"upstream-model", "messages":[{"role":"user","content":"hé \u00e9"}],"x_custom":{"nested":[1,2.50,true]},  "temperature":0.70}`},
		{"model last", `{"messages":[],"model":"m"}`, `{"messages":[],"model":"upstream-model"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := g.post("/v1/chat/completions", tc.in)
			if a.Status != 200 {
				t.Fatalf("status %d: %s", a.Status, a.Body)
			}
			if _, got := u.last(); got != tc.want {
				t.Fatalf("upstream got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestHeaderHandling(t *testing.T) {
	u := newUpstream(t, okChat)
	g := startGateway(t, upstreamYAML("up", u.URL, "auth: {token: gw-token}\n"))
	a := g.post("/v1/chat/completions", `{"model":"m","messages":[]}`,
		"Authorization", "Bearer gw-token", "X-Api-Key", "gw-token", "OpenAI-Organization", "org-1",
		"OpenAI-Beta", "assistants=v2", "X-Request-Id", "client-id-1", "Cookie", "c=1")
	if a.Status != 200 {
		t.Fatalf("status %d: %s", a.Status, a.Body)
	}
	h, _ := u.last()
	checks := []struct{ header, want string }{
		{"Authorization", "Bearer upstream-key"},
		{"X-Api-Key", ""},
		{"Openai-Organization", "org-1"},
		{"Openai-Beta", "assistants=v2"},
		{"X-Provider-Header", "p"},
		{"X-Shared", "from-entry"},
		{"Cookie", ""},
	}
	for _, c := range checks {
		if got := h.Get(c.header); got != c.want {
			t.Errorf("upstream %s = %q, want %q", c.header, got, c.want)
		}
	}
	if got := a.Header.Get("X-Request-Id"); got != "client-id-1" {
		t.Errorf("X-Request-Id echoed = %q", got)
	}
	if got := a.Header.Get("X-Ratelimit-Remaining-Requests"); got != "99" {
		t.Errorf("provider rate-limit header not passed through: %q", got)
	}
	// The access line is written just after the answer is flushed.
	waitFor(t, func() bool { return strings.Contains(g.logs.String(), "request_id=client-id-1") })
	if strings.Contains(g.logs.String(), "gw-token") || strings.Contains(g.logs.String(), "upstream-key") {
		t.Error("a secret reached the logs")
	}
}

func TestAnthropicNamedProviderUsesXAPIKey(t *testing.T) {
	u := newUpstream(t, okChat)
	g := startGateway(t, upstreamYAML("anthropic", u.URL, ""))
	if a := g.post("/v1/chat/completions", `{"model":"m","messages":[]}`); a.Status != 200 {
		t.Fatalf("status %d: %s", a.Status, a.Body)
	}
	h, _ := u.last()
	if h.Get("X-Api-Key") != "upstream-key" || h.Get("Authorization") != "" {
		t.Fatalf("x-api-key = %q, Authorization = %q", h.Get("X-Api-Key"), h.Get("Authorization"))
	}
}

func TestUpstreamErrorPassesThrough(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"message":"bad temperature","type":"invalid_request_error","param":"temperature","code":null}}`)
	})
	g := startGateway(t, upstreamYAML("up", u.URL, ""))
	a := g.post("/v1/chat/completions", `{"model":"m","messages":[]}`)
	if a.Status != 400 || !strings.Contains(a.Body, "bad temperature") {
		t.Fatalf("got %d %s", a.Status, a.Body)
	}
}

func TestBadUpstreamsAreClassified(t *testing.T) {
	tests := []struct {
		name string
		h    func(w http.ResponseWriter, r *http.Request, b []byte)
	}{
		{"html 200", func(w http.ResponseWriter, r *http.Request, b []byte) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>oops</html>")
		}},
		{"connection reset", func(w http.ResponseWriter, r *http.Request, b []byte) {
			c, _, _ := w.(http.Hijacker).Hijack()
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}},
		{"html 502", func(w http.ResponseWriter, r *http.Request, b []byte) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			io.WriteString(w, "<html>bad gateway</html>")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, tc.h)
			g := startGateway(t, upstreamYAML("up", u.URL, "retries: {max_attempts: 1, max_rounds: 1}\n"))
			a := g.post("/v1/chat/completions", `{"model":"m","messages":[]}`)
			if a.Status != 502 {
				t.Fatalf("status %d, want 502: %s", a.Status, a.Body)
			}
			var e errShape
			if json.Unmarshal([]byte(a.Body), &e) != nil || !strings.HasPrefix(e.Error.Message, "All providers failed: up: ") {
				t.Fatalf("body %s", a.Body)
			}
			// The gateway keeps serving.
			if a := g.get("/health"); a.Status != 200 {
				t.Fatal("gateway stopped serving")
			}
		})
	}
}

// TestSSERelayEventByEvent checks that each upstream event reaches the
// client before the upstream sends the next one: no buffering.
func TestSSERelayEventByEvent(t *testing.T) {
	next := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-time.After(5 * time.Second):
				return // the client never saw the event: the test fails below
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	g := startGateway(t, upstreamYAML("up", u.URL, ""))
	resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content-type %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 3; i++ {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !strings.Contains(line, fmt.Sprintf("t%d", i)) {
			t.Fatalf("event %d = %q", i, line)
		}
		br.ReadString('\n') // blank line
		next <- struct{}{}
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "data: [DONE]\n\n" {
		t.Fatalf("tail = %q", rest)
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	canceled := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(canceled)
		case <-time.After(10 * time.Second):
		}
	})
	g := startGateway(t, upstreamYAML("up", u.URL, ""))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream request was not canceled after the client left")
	}
}

// TestManyFastStreamsNoneCut guards against golang/go#40747: the request
// body must be fully read before the response starts, or fast streams get
// torn down mid-way.
func TestManyFastStreamsNoneCut(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 20; i++ {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%d\"}}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	g := startGateway(t, upstreamYAML("up", u.URL, ""))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("pad ", 2000) + `"}]}`
	var cut atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			resp, err := client.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				cut.Add(1)
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !strings.HasSuffix(string(b), "data: [DONE]\n\n") || strings.Count(string(b), "data: ") != 21 {
				cut.Add(1)
			}
		}()
	}
	wg.Wait()
	if c := cut.Load(); c != 0 {
		t.Fatalf("%d of %d streams were cut", c, n)
	}
}

func TestModelsEndpoints(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a", "b"))
	a := g.get("/v1/models")
	if a.Status != 200 || gjson.Get(a.Body, "object").String() != "list" ||
		gjson.Get(a.Body, "data.0.id").String() != "m" || gjson.Get(a.Body, "data.0.owned_by").String() != "switchboard" {
		t.Fatalf("/v1/models = %d %s", a.Status, a.Body)
	}
	a = g.get("/v1/models/m")
	if a.Status != 200 || gjson.Get(a.Body, "providers.#").Int() != 2 || gjson.Get(a.Body, "providers.1.model").String() != "b-model" {
		t.Fatalf("/v1/models/m = %d %s", a.Status, a.Body)
	}
	if a := g.get("/v1/models/zzz"); a.Status != 404 {
		t.Fatalf("unknown model: %d", a.Status)
	}
	if a := g.get("/ready"); a.Status != 200 {
		t.Fatalf("/ready = %d", a.Status)
	}
	if a := g.get("/metrics"); a.Status != 200 || !strings.Contains(a.Body, "switchboard_requests_total") {
		t.Fatalf("/metrics = %d", a.Status)
	}
}

func TestMockEndpoints(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	tests := []struct{ path, body, check string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "choices.0.message.content"},
		{"/v1/completions", `{"model":"m","prompt":"hi"}`, "choices.0.text"},
		{"/v1/responses", `{"model":"m","input":"hi"}`, "output.0.content.0.text"},
		{"/v1/embeddings", `{"model":"m","input":"hi"}`, "data.0.embedding"},
	}
	for _, tc := range tests {
		a := g.post(tc.path, tc.body)
		if a.Status != 200 || !gjson.Get(a.Body, tc.check).Exists() || a.Header.Get("X-Switchboard-Provider") != "a" {
			t.Errorf("%s = %d %s", tc.path, a.Status, a.Body)
		}
	}
}

// A unary answer goes out with its exact length (it is flushed before the
// gateway's bookkeeping, so it must not fall back to chunked encoding),
// cost_usd included.
func TestUnaryAnswerCarriesItsLength(t *testing.T) {
	u := newUpstream(t, okChat)
	g := startGateway(t, upstreamYAML("up", u.URL, ""))
	resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.ContentLength != int64(len(b)) || len(resp.TransferEncoding) != 0 {
		t.Fatalf("Content-Length %d, transfer encoding %v, body %d bytes", resp.ContentLength, resp.TransferEncoding, len(b))
	}
	if !gjson.GetBytes(b, "usage.cost_usd").Exists() || !gjson.ValidBytes(b) {
		t.Fatalf("body %s", b)
	}
}

// user:pass@ in a base URL still reaches the upstream as Basic auth where
// the provider's own key travels in another header (x-api-key for
// Anthropic), e.g. a self-hosted server behind an authenticating proxy.
func TestBaseURLCredentialsBecomeBasicAuth(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
	})
	base := strings.Replace(u.URL, "http://", "http://alice:s3cret@", 1)
	g := startGateway(t, fmt.Sprintf(`providers:
  self:
    type: anthropic
    base_url: %s
    api_key: sk-self
models:
  - name: m
    providers: [{provider: self, model: claude-x}]
`, base))
	if a := g.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); a.Status != 200 {
		t.Fatalf("status %d: %s", a.Status, a.Body)
	}
	h, _ := u.last()
	if got := h.Get("Authorization"); got != "Basic YWxpY2U6czNjcmV0" {
		t.Fatalf("Authorization = %q, want Basic alice:s3cret", got)
	}
	if got := h.Get("X-Api-Key"); got != "sk-self" {
		t.Fatalf("X-Api-Key = %q", got)
	}
}

// Whoever has a unary answer finds it counted in /metrics, even asking on
// another connection at once: the count is taken before the answer leaves.
func TestUnaryAnswerIsCountedBeforeItLeaves(t *testing.T) {
	u := newUpstream(t, okChat)
	g := startGateway(t, upstreamYAML("up", u.URL, ""))
	scraper := &http.Client{Transport: &http.Transport{}}
	const series = `switchboard_requests_total{route="/v1/chat/completions",status="200"} `
	for i := 1; i <= 20; i++ {
		if a := g.post("/v1/chat/completions", `{"model":"m","messages":[]}`); a.Status != 200 {
			t.Fatalf("status %d", a.Status)
		}
		resp, err := scraper.Get(g.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := series + strconv.Itoa(i)
		if !strings.Contains(string(b), want+"\n") {
			t.Fatalf("after %d answers /metrics lacks %q", i, want)
		}
	}
}

// A body nested a million deep is refused before any recursive parser sees
// it: gjson's validator recursed once per level, growing the stack to
// hundreds of MB for a 2 MB body and past Go's limit (a fatal error) for a
// larger one.
func TestDeeplyNestedBodyIsRefused(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a")+"limits: {max_request_body: 4194304}\n")
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"x":` + strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000) + `}`
	a := g.post("/v1/chat/completions", body)
	if a.Status != 400 || !strings.Contains(a.Body, "deeper than 512") || g.mock("a").Calls() != 0 {
		t.Fatalf("status %d, upstream calls %d: %s", a.Status, g.mock("a").Calls(), a.Body)
	}
	// Nesting well within the bound is an ordinary request.
	ok := `{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`
	if a := g.post("/v1/chat/completions", ok); a.Status != 200 {
		t.Fatalf("100 levels: %d %s", a.Status, a.Body)
	}
}
