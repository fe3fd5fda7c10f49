package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/config"
	"switchboard/internal/dispatch"
	"switchboard/internal/front"
	"switchboard/internal/idempotency"
	"switchboard/internal/queue"
	"switchboard/internal/store/redistest"
)

// Queue-mode replicas in one process: each its own Server, Redis clients
// and HTTP listener, sharing one real redis-server. (The crash tests with
// real processes, kill -9 and SIGSTOP are in cmd/switchboard.)

type replica struct {
	*gateway
	stop func() // ends the worker loop (and waits for it to drain)
}

// startQueued serves yaml in queue mode; queueLines adds lines (indented two
// spaces) to its queue section.
func startQueued(t *testing.T, srv *redistest.Server, yaml, queueLines string, roles ...dispatch.Role) []*replica {
	t.Helper()
	return startQueuedWith(t, srv, yaml, queueLines, nil, roles...)
}

// startQueuedWith is startQueued with setup run on each Server before its
// queue starts (nil: none).
func startQueuedWith(t *testing.T, srv *redistest.Server, yaml, queueLines string, setup func(*Server), roles ...dispatch.Role) []*replica {
	t.Helper()
	return startQueuedAt(t, singleAt(srv), yaml, queueLines, setup, roles...)
}

// startQueuedAt is startQueuedWith on the Redis at.
func startQueuedAt(t *testing.T, at redisAt, yaml, queueLines string, setup func(*Server), roles ...dispatch.Role) []*replica {
	t.Helper()
	yaml += "redis: " + at.yaml() + "\nqueue:\n  mode: redis\n" + queueLines
	cfg, err := config.Parse([]byte(yaml), "queue.yaml")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	out := make([]*replica, len(roles))
	for i, role := range roles {
		logs := &syncBuffer{ch: make(chan struct{}, 1)}
		var w io.Writer = logs
		if testing.Verbose() {
			w = io.MultiWriter(logs, os.Stderr)
		}
		log := slog.New(front.LogHandler{Handler: slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})}).With("replica", i+1)
		c := at.client(t, 64, time.Second)
		s := New(log, nil, nil)
		s.SetIdempotency(idempotency.NewRedis(c, idempotency.LimitsOf(&cfg.Idempotency)))
		s.Apply(cfg)
		if setup != nil {
			setup(s)
		}
		ctx, cancel := context.WithCancel(context.Background())
		wait := s.StartQueue(ctx, queue.New(c, queue.OptionsOf(&cfg.Queue)), role)
		stop := func() { cancel(); wait() }
		t.Cleanup(stop)
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(ts.Close)
		out[i] = &replica{gateway: &gateway{Server: s, URL: ts.URL, logs: logs, t: t}, stop: stop}
	}
	return out
}

var (
	ingressOnly = dispatch.Role{Ingress: true}
	workerOnly  = dispatch.Role{Worker: true}
)

// Through the queue, every endpoint answers as it does locally: the same
// bodies, a stream event by event ending in [DONE], and only the worker
// calls a provider.
func TestQueueServesLikeLocal(t *testing.T) {
	srv := redistest.Start(t)
	yaml := mockYAML("m", "a")
	local := startGateway(t, yaml)
	reps := startQueued(t, srv, yaml, "", ingressOnly, workerOnly)
	in, wk := reps[0], reps[1]
	cases := []struct{ path, body string }{
		{"/v1/chat/completions", chatBody},
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/completions", `{"model":"m","prompt":"hi"}`},
		{"/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/embeddings", `{"model":"m","input":"hi"}`},
	}
	for _, c := range cases {
		want := local.post(c.path, c.body)
		got := in.post(c.path, c.body)
		if got.Status != want.Status || shape(got.Body) != shape(want.Body) ||
			got.Header.Get("Content-Type") != want.Header.Get("Content-Type") ||
			got.Header.Get("X-Switchboard-Provider") != "a" {
			t.Errorf("%s %s:\nqueued %d %v %s\nlocal  %d %v %s", c.path, c.body, got.Status, got.Header, got.Body,
				want.Status, want.Header, want.Body)
		}
	}
	if in.mock("a").Calls() != 0 || wk.mock("a").Calls() != int64(len(cases)) {
		t.Fatalf("ingress called %d, worker %d", in.mock("a").Calls(), wk.mock("a").Calls())
	}
	// Validation still happens at the ingress, synchronously.
	if a := in.post("/v1/chat/completions", `{"model":"nope","messages":[]}`); a.Status != 404 {
		t.Fatalf("unknown model: %d %s", a.Status, a.Body)
	}
	// A worker-only replica takes no client request: 503 with Retry-After.
	calls := wk.mock("a").Calls()
	if a := wk.post("/v1/chat/completions", chatBody); a.Status != 503 || gjson.Get(a.Body, "error.code").String() != "not_ingress" ||
		a.Header.Get("Retry-After") == "" || wk.mock("a").Calls() != calls {
		t.Fatalf("request to a worker: %d %v %s", a.Status, a.Header, a.Body)
	}
}

// shape blanks ids and timestamps so two answers compare by content.
func shape(body string) string {
	var b strings.Builder
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "data: {") || strings.HasPrefix(line, "{") {
			j := strings.TrimPrefix(line, "data: ")
			r := gjson.Parse(j)
			line = r.Get("object").String() + "|" + r.Get("type").String() + "|" + r.Get("choices.0.delta.content").String() +
				r.Get("choices.0.message.content").String() + r.Get("choices.0.text").String() + r.Get("delta.text").String() +
				r.Get("content.0.text").String() + "|" + r.Get("error.code").String()
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// With no worker running, 50 concurrent submits over two ingress
// replicas against queue.depth 10: exactly 10 wait, 40 are refused with
// 503 queue_full and Retry-After; /v1/health/detail and the gauges show
// the 10. The waiting clients then leave, and their jobs are canceled.
func TestQueueDepthBoundAcrossIngress(t *testing.T) {
	srv := redistest.Start(t)
	reps := startQueued(t, srv, mockYAML("m", "a"), "  depth: 10\n", ingressOnly, ingressOnly)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var full atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, reps[i%2].URL+"/v1/chat/completions", strings.NewReader(chatBody))
			resp, err := fleetClient.Do(req)
			if err != nil {
				return // one of the 10 waiting, canceled below
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "" && gjson.GetBytes(b, "error.code").String() == "queue_full" {
				full.Add(1)
			} else {
				t.Errorf("unexpected %d %s", resp.StatusCode, b)
			}
		}()
	}
	waitFor(t, func() bool { return full.Load() == 40 })
	d := reps[0].get("/v1/health/detail")
	if w := gjson.Get(d.Body, "queue.waiting.a").Int(); w != 10 || gjson.Get(d.Body, "queue.role").String() != "ingress" {
		t.Fatalf("health detail: %s", d.Body)
	}
	if m := reps[1].get("/metrics").Body; !strings.Contains(m, `switchboard_queue_waiting{provider="a"} 10`) {
		t.Fatalf("metrics lack the waiting gauge")
	}
	cancel()
	wg.Wait()
	waitFor(t, func() bool {
		return strings.Contains(reps[0].get("/metrics").Body, `switchboard_queue_waiting{provider="a"} 0`)
	})
	if full.Load() != 40 {
		t.Fatalf("%d refused, want 40", full.Load())
	}
}

// Redis killed under load: the queue fails closed (503 with Retry-After,
// no crash), and serves again after Redis restarts, without a restart of
// the gateway.
func TestQueueRedisRestartUnderLoad(t *testing.T) {
	srv := redistest.Start(t)
	reps := startQueued(t, srv, mockYAML("m", "a"), "", dispatch.Role{Ingress: true, Worker: true})
	g := reps[0]
	if a := g.post("/v1/chat/completions", chatBody); a.Status != 200 {
		t.Fatalf("before: %d %s", a.Status, a.Body)
	}
	srv.Kill()
	waitFor(t, func() bool {
		a := g.post("/v1/chat/completions", chatBody)
		if a.Status != 503 {
			return false
		}
		if a.Header.Get("Retry-After") == "" || gjson.Get(a.Body, "error.code").String() != "queue_unavailable" {
			t.Fatalf("while down: %d %v %s", a.Status, a.Header, a.Body)
		}
		return true
	})
	srv.Restart()
	waitFor(t, func() bool { return g.post("/v1/chat/completions", chatBody).Status == 200 })
	// Streams too: the worker's and origin's subscriptions came back.
	a := g.post("/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if a.Status != 200 || !strings.HasSuffix(a.Body, "data: [DONE]\n\n") {
		t.Fatalf("stream after restart: %d %q", a.Status, a.Body)
	}
}

// The worker serves a job as the caller it came from: the key travels as
// its digest, and the tenant's own limits answer through the queue (429
// with Retry-After, as without it).
func TestQueueCarriesTheCallerIdentity(t *testing.T) {
	srv := redistest.Start(t)
	yaml := mockYAML("m", "a") + "auth:\n  keys:\n    sk-acme: {tenant: acme, rpm: 1}\n"
	reps := startQueued(t, srv, yaml, "", ingressOnly, workerOnly)
	if a := reps[0].post("/v1/chat/completions", chatBody); a.Status != 401 {
		t.Fatalf("no key: %d", a.Status)
	}
	if a := reps[0].post("/v1/chat/completions", chatBody, "Authorization", "Bearer sk-acme"); a.Status != 200 {
		t.Fatalf("first: %d %s", a.Status, a.Body)
	}
	a := reps[0].post("/v1/chat/completions", chatBody, "Authorization", "Bearer sk-acme")
	if a.Status != 429 || a.Header.Get("Retry-After") == "" || gjson.Get(a.Body, "error.code").String() != "rate_limit_exceeded" {
		t.Fatalf("over the tenant's rpm: %d %v %s", a.Status, a.Header, a.Body)
	}
}

// A unary result larger than the terminal capacity reserved for it
// becomes a fixed-size error, not a crash or a partial answer.
func TestQueueOversizedResultIsAFixedError(t *testing.T) {
	srv := redistest.Start(t)
	yaml := strings.Replace(mockYAML("m", "a"), "mock: {tokens: 5}", "mock: {tokens: 3000}", 1)
	reps := startQueued(t, srv, yaml, "  unary_terminal_bytes: 4096\n", ingressOnly, workerOnly)
	a := reps[0].post("/v1/chat/completions", chatBody)
	if a.Status != 502 || !strings.Contains(a.Body, "queue.unary_terminal_bytes") {
		t.Fatalf("oversized: %d %.300s", a.Status, a.Body)
	}
	// Streams are not bound by it: their bytes are relayed as they come.
	s := reps[0].post("/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if s.Status != 200 || !strings.HasSuffix(s.Body, "data: [DONE]\n\n") || len(s.Body) < 4096 {
		t.Fatalf("stream: %d %d bytes", s.Status, len(s.Body))
	}
}

// examples/queue.yaml is a valid queue-mode config.
func TestQueueExampleConfig(t *testing.T) {
	cfg, err := config.Load("../../examples/queue.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Queue.Redis() || cfg.Queue.UnaryTerminalBytes != 1<<20 {
		t.Fatalf("queue section: %+v", cfg.Queue)
	}
}

// A job record a worker cannot read (another program's, or corrupted) is
// refused with the reason logged and dead-lettered after max_deliveries,
// never run and never a panic.
func TestQueueMalformedJobIsDeadLettered(t *testing.T) {
	srv := redistest.Start(t)
	reps := startQueued(t, srv, mockYAML("m", "a"), "", workerOnly)
	c, _ := queue.Dial(srv.URL, time.Second, time.Second, 4)
	defer c.Close()
	q := queue.New(c, queue.Options{})
	j := &queue.Job{ID: queue.NewID(), Provider: "a", Timeout: time.Minute, Request: []byte("not a job envelope")}
	if _, err := q.Enqueue(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		d, err := q.DeadJob(context.Background(), j.ID)
		return err == nil && strings.Contains(d.Error, "malformed job record") && d.Deliveries == 3
	})
	if reps[0].mock("a").Calls() != 0 || !strings.Contains(reps[0].logs.String(), "refusing a job") {
		t.Fatalf("calls %d, logs %s", reps[0].mock("a").Calls(), reps[0].logs.String())
	}
}
