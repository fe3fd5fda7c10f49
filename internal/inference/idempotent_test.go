package inference

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
	"switchboard/internal/idempotency"
	"switchboard/internal/metrics"
	"switchboard/internal/snapshot"
)

// A duplicate of a request still running waits for it on the injected
// clock, polling, and gives up with 409 idempotency_key_in_use once
// timeouts.request has passed on that clock, not before, without running
// the request itself.
func TestIdempotencyWaitRunsOnTheClock(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	p := &Plane{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clk, Metrics: metrics.New(),
		Idempotency: idempotency.NewMemory(idempotency.Limits{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 20, MaxTotal: 1 << 20}, nil)}
	cfg := &config.Config{}
	cfg.Timeouts.Request = config.Duration(30 * time.Second)
	in := &incoming{snap: &snapshot.Snapshot{Config: cfg}, body: []byte(`{"model":"m"}`)}
	req := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		r.Header.Set("Idempotency-Key", "k-1")
		return r
	}
	// The first request holds the key until the test ends.
	running, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	go p.idempotent(httptest.NewRecorder(), req(), front.OpenAI, in, func(http.ResponseWriter) {
		close(running)
		<-release
	})
	<-running

	w := httptest.NewRecorder()
	done := make(chan bool, 1)
	go func() {
		served := false
		p.idempotent(w, req(), front.OpenAI, in, func(http.ResponseWriter) { served = true })
		done <- served
	}()
	bound := time.Now().Add(10 * time.Second) // real time: only a hang fails here
	for advanced := 0; ; {
		select {
		case served := <-done:
			if served {
				t.Fatal("the duplicate ran the request itself")
			}
			if advanced != 31 {
				t.Fatalf("the duplicate gave up after %d s on the clock, want 31 (timeouts.request 30 s)", advanced)
			}
			if w.Code != http.StatusConflict || gjson.Get(w.Body.String(), "error.code").String() != "idempotency_key_in_use" {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			return
		default:
		}
		if time.Now().After(bound) {
			t.Fatalf("the duplicate is still waiting after %d s on the clock", advanced)
		}
		if clk.Waiters() == 0 {
			continue // not yet waiting for its next poll
		}
		clk.Advance(time.Second)
		advanced++
	}
}

// An Idempotency-Key header that names no single key (two lines, or an
// empty value) is refused in the client's protocol without running the
// request, rather than silently using the first line or no key at all.
func TestIdempotencyKeyAmbiguousRefused(t *testing.T) {
	p := &Plane{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clock.NewFake(time.Now()), Metrics: metrics.New(),
		Idempotency: idempotency.NewMemory(idempotency.Limits{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 20, MaxTotal: 1 << 20}, nil)}
	cfg := &config.Config{}
	cfg.Timeouts.Request = config.Duration(30 * time.Second)
	in := &incoming{snap: &snapshot.Snapshot{Config: cfg}, body: []byte(`{"model":"m"}`)}
	for _, tc := range []struct {
		name   string
		values []string
		proto  front.Protocol
		status int
	}{
		{"two lines", []string{"a", "b"}, front.OpenAI, http.StatusBadRequest},
		{"same twice", []string{"a", "a"}, front.Anthropic, http.StatusBadRequest},
		{"empty", []string{""}, front.OpenAI, http.StatusBadRequest},
		{"one", []string{"a"}, front.OpenAI, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			r.Header["Idempotency-Key"] = tc.values
			w := httptest.NewRecorder()
			served := false
			p.idempotent(w, r, tc.proto, in, func(w http.ResponseWriter) { served = true; w.WriteHeader(http.StatusOK) })
			if w.Code != tc.status || served != (tc.status == http.StatusOK) {
				t.Fatalf("status %d served %v, want %d: %s", w.Code, served, tc.status, w.Body)
			}
			if tc.status != http.StatusOK && !gjson.Get(w.Body.String(), "error.message").Exists() {
				t.Fatalf("not an error in the client's protocol: %s", w.Body)
			}
		})
	}
}
