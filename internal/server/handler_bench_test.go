package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/tracing"
	"switchboard/internal/usagelog"
)

// cannedRT answers every request at once with one chat completion: the
// handler's own cost is what is left.
type cannedRT struct{ body []byte }

func (c cannedRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, Request: r,
		Header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(c.body))}},
		Body:   io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body))}, nil
}

const benchAnswer = `{"id":"chatcmpl-bench","object":"chat.completion","created":1764547200,"model":"up-model",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"The quick brown fox jumps over the lazy dog."},` +
	`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":212,"completion_tokens":36,"total_tokens":248}}`

// benchRoute is the handler benchmarks' provider and model: one OpenAI
// provider behind a transport that answers in memory.
const benchRoute = `
providers:
  up:
    type: openai
    base_url: http://upstream.invalid/v1
    api_key: sk-up
models:
  - name: bench-model
    providers:
      - provider: up
        model: up-model
`

// BenchmarkUnaryHandler is one non-streaming request through the whole
// gateway handler (auth, envelope check, routing, admission, the attempt
// loop, usage, cost, metrics) beside httputil.ReverseProxy, both against a
// transport that answers in memory: the CPU each spends per request, with
// the network taken out.
func BenchmarkUnaryHandler(b *testing.B) {
	rt := cannedRT{body: []byte(benchAnswer)}
	body := `{"model":"bench-model","messages":[{"role":"user","content":"Say something about the quick brown fox, please."}],"max_tokens":64}`
	cfg, err := config.Parse([]byte(benchRoute+`
auth:
  token: tok
logging:
  level: warn
store:
  backend: memory
`), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	s := New(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})), nil, &http.Client{Transport: rt})
	s.Apply(cfg)
	// The same gateway with the usage log on (its writer included).
	logged := New(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})), nil, &http.Client{Transport: rt})
	db, err := usagelog.Open(filepath.Join(b.TempDir(), usagelog.DefaultFile))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ul := usagelog.NewLog(db, usagelog.Options{Buffer: 1 << 20})
	defer ul.Close()
	logged.SetUsageLog(ul)
	logged.Apply(cfg)
	// The same gateway with every request traced (sample ratio 1) to an
	// OTLP/HTTP sink that discards: run with -cpu 1 so that the export
	// goroutine's work counts in ns/op too.
	traced := New(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})), nil, &http.Client{Transport: rt})
	traced.Apply(cfg)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer sink.Close()
	on, one := true, 1.0
	tr, err := tracing.New(config.Tracing{Enabled: &on, Endpoint: sink.URL, SampleRatio: &one, QueueSize: 4096, BatchSize: 512,
		BatchTimeout: config.Duration(time.Second), ExportTimeout: config.Duration(10 * time.Second)},
		tracing.Options{Getenv: func(string) (string, bool) { return "", false }})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	traced.SetTracer(tr)
	// And with a tenth of the requests traced.
	tenth := New(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})), nil, &http.Client{Transport: rt})
	tenth.Apply(cfg)
	r10 := 0.1
	tr10, err := tracing.New(config.Tracing{Enabled: &on, Endpoint: sink.URL, SampleRatio: &r10, QueueSize: 4096, BatchSize: 512,
		BatchTimeout: config.Duration(time.Second), ExportTimeout: config.Duration(10 * time.Second)},
		tracing.Options{Getenv: func(string) (string, bool) { return "", false }})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tr10.Shutdown(context.Background()) }()
	tenth.SetTracer(tr10)
	target, _ := url.Parse("http://upstream.invalid")
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, FlushInterval: -1, Transport: rt}
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{{"gateway", s.Handler()}, {"gateway-usage-log", logged.Handler()}, {"gateway-traced", traced.Handler()},
		{"gateway-traced-10pct", tenth.Handler()}, {"reverseproxy", rp}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer tok")
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				tc.h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
