package proxy

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/metrics"
	"switchboard/internal/provider"
	"switchboard/internal/route"
)

// heldUnary answers a unary chat call once released, whether or not its
// caller is still there: a provider that finishes an answer the gateway
// has already given up on.
type heldUnary struct {
	name    string
	release chan struct{}
	calls   atomic.Int64
}

func (h *heldUnary) Send(ctx context.Context, req *provider.Request) (*provider.Response, error) {
	h.calls.Add(1)
	<-h.release
	body := fmt.Sprintf(`{"id":"x","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
		h.name, h.name)
	return &provider.Response{Status: 200, Body: provider.JSONBody([]byte(body))}, nil
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("condition not reached")
		}
	}
}

func counterOf(t *testing.T, m interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

// TestLateLoserIsCountedNotReturned: the original commits first; the
// hedge then finishes its answer too (its provider ignored the cancel).
// Exactly one Result is returned, the late answer is closed, and its
// reported tokens are counted as waste.
func TestLateLoserIsCountedNotReturned(t *testing.T) {
	a := &heldUnary{name: "a", release: make(chan struct{})}
	b := &heldUnary{name: "b", release: make(chan struct{})}
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	m := metrics.New()
	p := &Proxy{Clock: clk, Metrics: m}
	rt := &route.Route{Model: &config.Model{Name: "m"}, Candidates: []*route.Candidate{
		{Provider: "a", Type: "openai", Model: "a-model", Send: a},
		{Provider: "b", Type: "openai", Model: "b-model", Send: b},
	}}
	c := &Call{Endpoint: provider.Chat, Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), Route: rt,
		Opts: Options{MaxAttempts: 1, MaxRounds: 1, Deadline: time.Minute, Hedge: &Hedge{After: 100 * time.Millisecond, MaxExtra: 1}}}
	type done struct {
		res  *Result
		fail *Failure
	}
	out := make(chan done, 1)
	go func() {
		res, fail := p.Do(context.Background(), c)
		out <- done{res, fail}
	}()
	// Armed: a's deadline watcher and the hedge timer.
	waitUntil(t, func() bool { return a.calls.Load() == 1 && clk.Waiters() == 2 })
	clk.Advance(100 * time.Millisecond)
	waitUntil(t, func() bool { return b.calls.Load() == 1 })
	close(a.release)
	d := <-out
	if d.fail != nil || d.res == nil || d.res.Candidate.Provider != "a" {
		t.Fatalf("result %+v, failure %+v: want a's answer", d.res, d.fail)
	}
	d.res.Close()
	close(b.release)
	p.WaitHedges()
	h := m.Hedge
	if got := counterOf(t, h.WastedTokens.WithLabelValues("m", "b")); got != 12 {
		t.Fatalf("wasted tokens of the late loser: %v, want 12", got)
	}
	if got := counterOf(t, h.Won.WithLabelValues("m", "a", "original")); got != 1 {
		t.Fatalf("races won by the original: %v", got)
	}
	if got := counterOf(t, h.Started.WithLabelValues("m", "b")); got != 1 {
		t.Fatalf("hedges started: %v", got)
	}
}
