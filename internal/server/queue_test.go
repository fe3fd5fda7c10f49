package server

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/config"
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

func startQueued(t *testing.T, srv *redistest.Server, yaml string, roles ...Role) []*replica {
	t.Helper()
	yaml += "redis: {url: \"" + srv.URL + "\"}\nqueue:\n  mode: redis\n"
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
		log := slog.New(LogHandler{slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})}).With("replica", i+1)
		c, err := queue.Dial(srv.URL, time.Second, time.Second, 64)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s := New(log, nil, nil)
		s.SetIdempotency(idempotency.NewRedis(c, IdempotencyLimits(cfg)))
		s.Apply(cfg)
		ctx, cancel := context.WithCancel(context.Background())
		wait := s.StartQueue(ctx, queue.New(c, QueueOptions(cfg)), role)
		stop := func() { cancel(); wait() }
		t.Cleanup(stop)
		ts := httptest.NewServer(s.Handler())
		t.Cleanup(ts.Close)
		out[i] = &replica{gateway: &gateway{Server: s, URL: ts.URL, logs: logs, t: t}, stop: stop}
	}
	return out
}

var (
	ingressOnly = Role{Ingress: true}
	workerOnly  = Role{Worker: true}
)

// Through the queue, every endpoint answers as it does locally: the same
// bodies, a stream event by event ending in [DONE], and only the worker
// calls a provider.
func TestQueueServesLikeLocal(t *testing.T) {
	srv := redistest.Start(t)
	yaml := mockYAML("m", "a")
	local := startGateway(t, yaml)
	reps := startQueued(t, srv, yaml, ingressOnly, workerOnly)
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
