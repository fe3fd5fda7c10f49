package dispatch

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/front"
	"switchboard/internal/metrics"
	"switchboard/internal/provider"
	"switchboard/internal/provider/mock"
	"switchboard/internal/queue"
	"switchboard/internal/route"
	"switchboard/internal/snapshot"
	"switchboard/internal/store/redistest"
)

// The origin waits for its job on the injected clock: a job no worker
// takes is answered 504 deadline_exceeded once timeouts.request has
// passed on that clock, and not before.
func TestOriginDeadlineRunsOnTheClock(t *testing.T) {
	srv := redistest.Start(t)
	c, err := queue.Dial(srv.URL, time.Second, time.Second, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cfg, err := config.Parse([]byte("providers:\n  a: {type: mock, mock: {tokens: 5}}\nmodels:\n  - name: m\n    providers: [{provider: a, model: a-model}]\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	table := route.Compile(cfg, func(pc *config.Provider) provider.Provider { return mock.New(pc.Name, *pc.Mock) })
	snap := snapshot.New(cfg, table, clk.Now())
	p := &Plane{Q: queue.New(c, queue.Options{}), Role: Role{Ingress: true}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock: clk, Metrics: metrics.New(), Snap: func() *snapshot.Snapshot { return snap },
		Selector: &route.Selector{Stats: route.NewStats(clk, time.Minute)}}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	done := make(chan bool, 1)
	go func() {
		done <- p.Dispatch(w, r, front.OpenAI, provider.Chat, &Request{Route: table.Lookup("m"), Model: "m",
			Body: []byte(`{"model":"m","messages":[]}`), Timeout: 30 * time.Second})
	}()
	bound := time.Now().Add(10 * time.Second) // real time: only a hang fails here
	for advanced := 0; ; {
		select {
		case refused := <-done:
			if refused {
				t.Fatalf("refused before enqueueing: %d %s", w.Code, w.Body)
			}
			if advanced != 30 {
				t.Fatalf("answered after %d s on the clock, want 30 (timeouts.request)", advanced)
			}
			if w.Code != http.StatusGatewayTimeout || gjson.Get(w.Body.String(), "error.code").String() != "deadline_exceeded" {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			return
		default:
		}
		if time.Now().After(bound) {
			t.Fatalf("no answer after %d s on the clock", advanced)
		}
		if clk.Waiters() < 2 {
			continue // the relay is not waiting on its deadline and its next check yet
		}
		clk.Advance(time.Second)
		advanced++
	}
}
