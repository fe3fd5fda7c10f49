package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/store/redistest"
	"switchboard/internal/tags"
	"switchboard/internal/tracing"
	"switchboard/internal/tracing/otlptest"
)

// traceTo makes a tracer exporting to rcv.
func traceTo(t *testing.T, rcv *otlptest.Receiver) *tracing.Tracer {
	t.Helper()
	on := true
	tr, err := tracing.New(config.Tracing{Enabled: &on, Endpoint: rcv.URL, QueueSize: 1024, BatchSize: 128,
		BatchTimeout: config.Duration(20 * time.Millisecond), ExportTimeout: config.Duration(2 * time.Second)},
		tracing.Options{Getenv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

// flushed exports everything ended so far.
func flushed(t *testing.T, tr *tracing.Tracer, rcv *otlptest.Receiver) []otlptest.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return rcv.Spans()
}

// spansOf flushes until trace ("": any) has n spans or 5 s passed: the
// server span ends just after the client read its answer.
func spansOf(t *testing.T, tr *tracing.Tracer, rcv *otlptest.Receiver, trace string, n int) []otlptest.Span {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		spans := flushed(t, tr, rcv)
		if trace != "" {
			spans = otlptest.Trace(spans, trace)
		}
		if len(spans) >= n || time.Now().After(deadline) {
			return spans
		}
	}
}

// tracedUpstream is an OpenAI-compatible provider that answers status (a chat
// completion when 200) and keeps the traceparent of each request.
type tracedUpstream struct {
	srv    *httptest.Server
	mu     sync.Mutex
	parent []string
}

func newTracedUpstream(t *testing.T, status int) *tracedUpstream {
	u := &tracedUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.parent = append(u.parent, r.Header.Get("Traceparent"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status != 200 {
			_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"cmpl-1","object":"chat.completion","model":"up-model-2026","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *tracedUpstream) parents() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.parent...)
}

// TestTraceOneRequest: a request that fails on its first provider and is
// served by the second is one trace continuing the client's: the server
// span, and each attempt a client span under it with the GenAI
// attributes; each provider received its own attempt's traceparent.
func TestTraceOneRequest(t *testing.T) {
	bad, good := newTracedUpstream(t, 503), newTracedUpstream(t, 200)
	yaml := "providers:\n  bad: {base_url: " + bad.srv.URL + "}\n  good: {base_url: " + good.srv.URL + "}\n" +
		"models:\n  - name: m\n    providers: [{provider: bad, model: bad-model}, {provider: good, model: good-model}]\n" +
		"retries: {max_attempts: 1, max_rounds: 1}\ntags: {}\n"
	g := startGateway(t, yaml)
	rcv := otlptest.Start(t)
	tr := traceTo(t, rcv)
	g.SetTracer(tr)

	const client = "0af7651916cd43dd8448eb211c80319c"
	a := g.post("/v1/chat/completions", chatBody, "Traceparent", "00-"+client+"-b7ad6b7169203331-01", tags.Header, "team=search")
	if a.Status != 200 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	spans := spansOf(t, tr, rcv, client, 3)
	server := otlptest.Named(spans, "POST /v1/chat/completions")
	if len(spans) != 3 || len(server) != 1 {
		t.Fatalf("%d spans in the client's trace, want the server span and two attempts: %+v", len(spans), spans)
	}
	sv := server[0]
	if sv.ParentID != "b7ad6b7169203331" || sv.Attrs["http.response.status_code"] != int64(200) || sv.Attrs["switchboard.tag.team"] != "search" ||
		sv.Attrs["gen_ai.request.model"] != "m" || sv.Attrs["switchboard.request_id"] != a.Header.Get("X-Request-Id") {
		t.Fatalf("server span %+v", sv)
	}
	first, second := otlptest.Named(spans, "chat bad-model"), otlptest.Named(spans, "chat good-model")
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("attempt spans: %+v", spans)
	}
	for _, at := range []otlptest.Span{first[0], second[0]} {
		if at.ParentID != sv.SpanID || at.Kind != 3 {
			t.Fatalf("attempt %q: %+v", at.Name, at)
		}
	}
	if first[0].Attrs["error.type"] != "server_error" || first[0].Attrs["http.response.status_code"] != int64(503) {
		t.Fatalf("failed attempt %+v", first[0].Attrs)
	}
	s := second[0].Attrs
	if s["gen_ai.response.model"] != "up-model-2026" || s["gen_ai.usage.input_tokens"] != int64(9) || s["gen_ai.usage.output_tokens"] != int64(2) ||
		s["gen_ai.provider.name"] != "openai" || s["switchboard.provider"] != "good" || s["server.address"] != "127.0.0.1" {
		t.Fatalf("served attempt %+v", s)
	}
	if _, ok := sv.Attrs["gen_ai.input.messages"]; ok {
		t.Fatal("prompt captured without tracing.capture_content")
	}
	for _, c := range []struct {
		u    *tracedUpstream
		span otlptest.Span
	}{{bad, first[0]}, {good, second[0]}} {
		if p := c.u.parents(); len(p) != 1 || p[0] != "00-"+client+"-"+c.span.SpanID+"-01" {
			t.Fatalf("tracedUpstream got traceparent %v, want its attempt %s", p, c.span.SpanID)
		}
	}
}

// TestTraceStream: a streamed answer's attempt span ends when the relay
// does, with the stream's model, finish reason and usage.
func TestTraceStream(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	rcv := otlptest.Start(t)
	tr := traceTo(t, rcv)
	g.SetTracer(tr)
	a := g.post("/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if a.Status != 200 || !strings.Contains(a.Body, "[DONE]") {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	spans := spansOf(t, tr, rcv, "", 2)
	at := otlptest.Named(spans, "chat a-model")
	if len(spans) != 2 || len(at) != 1 {
		t.Fatalf("spans %+v", spans)
	}
	x := at[0].Attrs
	if x["switchboard.stream.outcome"] != "completed" || x["gen_ai.usage.output_tokens"] != int64(5) || x["gen_ai.request.stream"] != true {
		t.Fatalf("stream attempt %+v", x)
	}
	if fr, _ := x["gen_ai.response.finish_reasons"].([]any); len(fr) != 1 || fr[0] != "stop" {
		t.Fatalf("finish reasons %v", x["gen_ai.response.finish_reasons"])
	}
}

// TestTraceQueued: in queue mode a request is one trace across the
// ingress and the worker: the ingress's server span, the job's wait in
// the queue, the worker's span, and the attempt under it.
func TestTraceQueued(t *testing.T) {
	srv := redistest.Start(t)
	rcv := otlptest.Start(t)
	var tracers []*tracing.Tracer
	reps := startQueuedWith(t, srv, mockYAML("m", "a"), "", func(s *Server) {
		tr := traceTo(t, rcv)
		tracers = append(tracers, tr)
		s.SetTracer(tr)
	}, ingressOnly, workerOnly)
	const client = "5b8aa5a2d2c872e8321cf37308d69df2"
	a := reps[0].post("/v1/chat/completions", chatBody, "Traceparent", "00-"+client+"-051581bf3cb55c13-01")
	if a.Status != 200 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	var spans []otlptest.Span
	deadline := time.Now().Add(10 * time.Second)
	for len(spans) < 4 && time.Now().Before(deadline) {
		// The worker ends its span as its handler returns, which may be
		// just after the ingress relayed the answer.
		for _, tr := range tracers {
			flushed(t, tr, rcv)
		}
		spans = otlptest.Trace(rcv.Spans(), client)
		time.Sleep(10 * time.Millisecond)
	}
	by := map[string][]otlptest.Span{}
	for _, s := range spans {
		by[s.Name] = append(by[s.Name], s)
	}
	ingress, wait, job, at := by["POST /v1/chat/completions"], by["queue wait"], by["job /v1/chat/completions"], by["chat a-model"]
	if len(spans) != 4 || len(ingress) != 1 || len(wait) != 1 || len(job) != 1 || len(at) != 1 {
		t.Fatalf("one trace of four spans, got %d: %+v", len(spans), spans)
	}
	if wait[0].ParentID != ingress[0].SpanID || job[0].ParentID != ingress[0].SpanID || at[0].ParentID != job[0].SpanID {
		t.Fatalf("tree: ingress %s, wait under %s, job under %s, attempt under %s (job %s)", ingress[0].SpanID,
			wait[0].ParentID, job[0].ParentID, at[0].ParentID, job[0].SpanID)
	}
	if job[0].Kind != 5 || job[0].Attrs["http.response.status_code"] != int64(200) {
		t.Fatalf("job span %+v", job[0])
	}
}
