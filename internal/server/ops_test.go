package server

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/route"
)

func TestPrewarmOpensEachOrigin(t *testing.T) {
	var heads atomic.Int64
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		if r.Method == http.MethodHead {
			heads.Add(1)
		}
	})
	g := startGateway(t, upstreamYAML("up", u.URL, "performance: {prewarm_connections: true}\n"))
	g.Prewarm()
	if heads.Load() != 1 {
		t.Fatalf("prewarm sent %d HEAD requests, want 1", heads.Load())
	}
}

func TestUpstreamRequestIDIsRenamed(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		w.Header().Set("X-Request-Id", "upstream-123")
		okChat(w, r, b)
	})
	g := startGateway(t, upstreamYAML("up", u.URL, ""))
	a := g.post("/v1/chat/completions", chatBody, "X-Request-Id", "mine")
	if a.Header.Get("X-Request-Id") != "mine" || a.Header.Get("X-Upstream-Request-Id") != "upstream-123" {
		t.Fatalf("request ids: ours %q, upstream's %q", a.Header.Get("X-Request-Id"), a.Header.Get("X-Upstream-Request-Id"))
	}
}

func TestTPSSummaryLogged(t *testing.T) {
	clk := clock.NewFake(time.Now())
	g := startGatewayClock(t, mockYAML("m", "a")+"metrics: {tps_log: {interval: 5, min_tokens: 100}}\n", clk)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { g.ReportTPS(stop); close(done) }()
	defer func() { close(stop); <-done }()
	g.Stats.Record("m", "a", route.Sample{TTFT: 0.1, TPS: 40, Tokens: 60, TS: clk.Now()})
	g.Stats.Record("m", "a", route.Sample{TTFT: 0.1, TPS: 60, Tokens: 60, TS: clk.Now()})
	waitFor(t, func() bool { return clk.Waiters() == 1 })
	clk.Advance(5 * time.Second)
	waitFor(t, func() bool {
		return strings.Contains(g.logs.String(), "[tps] m/a tps=50.0 p50=40.0 p90=60.0 n=2 tokens=120")
	})
}

func TestTPSSummaryWaitsForMinTokens(t *testing.T) {
	clk := clock.NewFake(time.Now())
	g := startGatewayClock(t, mockYAML("m", "a")+"metrics: {tps_log: {interval: 5, min_tokens: 500}}\n", clk)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { g.ReportTPS(stop); close(done) }()
	g.Stats.Record("m", "a", route.Sample{TTFT: 0.1, TPS: 40, Tokens: 60, TS: clk.Now()})
	waitFor(t, func() bool { return clk.Waiters() == 1 })
	clk.Advance(5 * time.Second)
	waitFor(t, func() bool { return clk.Waiters() == 1 }) // the next round is armed: this one is done
	close(stop)
	<-done
	if strings.Contains(g.logs.String(), "[tps]") {
		t.Fatal("summary logged below min_tokens")
	}
}
