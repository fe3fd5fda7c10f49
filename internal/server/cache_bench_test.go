package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"switchboard/internal/config"
)

// missSeq makes each miss's body distinct across benchmark runs.
var missSeq int

// BenchmarkCacheHitHandler is one non-streaming request through the
// whole handler answered from the response cache (memory store), beside
// the same request as a miss through the attempt loop (the cache on, each
// body distinct) and beside httputil.ReverseProxy, all against a
// transport that answers in memory: the CPU each spends per request.
func BenchmarkCacheHitHandler(b *testing.B) {
	rt := cannedRT{body: []byte(benchAnswer)}
	cfg, err := config.Parse([]byte(`
providers:
  up: {type: openai, base_url: http://upstream.invalid/v1, api_key: sk-up}
models:
  - name: bench-model
    providers: [{provider: up, model: up-model}]
auth: {token: tok}
logging: {level: warn}
store: {backend: memory}
cache: {enabled: true}
`), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	s := New(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})), nil, &http.Client{Transport: rt})
	s.Apply(cfg)
	target, _ := url.Parse("http://upstream.invalid")
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, FlushInterval: -1, Transport: rt}
	body := func(q string) string {
		return `{"model":"bench-model","temperature":0,"messages":[{"role":"user","content":"Say something about the quick brown fox, please` +
			q + `."}],"max_tokens":64}`
	}
	send := func(b *testing.B, h http.Handler, body, want string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 || w.Header().Get("X-Switchboard-Cache") != want {
			b.Fatalf("status %d, cache %q: %s", w.Code, w.Header().Get("X-Switchboard-Cache"), w.Body)
		}
	}
	h := s.Handler()
	send(b, h, body(""), "miss")
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			send(b, h, body(""), "hit")
		}
	})
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			missSeq++
			send(b, h, body(" "+strconv.Itoa(missSeq)), "miss")
		}
	})
	b.Run("reverseproxy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			send(b, rp, body(""), "")
		}
	})
}
