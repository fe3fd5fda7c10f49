package server

import (
	"strings"
	"sync"
	"testing"

	"switchboard/internal/store/redistest"
)

// A repeat with the same key and body is the stored answer, byte for
// byte, marked replayed, with no provider call; another body is 422.
func TestIdempotencyReplayAndConflict(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	stream := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct{ name, path, body string }{
		{"unary", "/v1/chat/completions", chatBody},
		{"stream", "/v1/chat/completions", stream},
		{"messages", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := g.mock("a").Calls()
			key := "key-" + tc.name
			first := g.post(tc.path, tc.body, "Idempotency-Key", key)
			again := g.post(tc.path, tc.body, "Idempotency-Key", key)
			if first.Status != 200 || again.Status != 200 || again.Body != first.Body ||
				again.Header.Get("Idempotent-Replayed") != "true" || first.Header.Get("Idempotent-Replayed") != "" ||
				again.Header.Get("Content-Type") != first.Header.Get("Content-Type") {
				t.Fatalf("first %d %v %q\nagain %d %v %q", first.Status, first.Header, first.Body, again.Status, again.Header, again.Body)
			}
			if tc.name == "stream" && !strings.HasSuffix(again.Body, "data: [DONE]\n\n") {
				t.Fatalf("replayed stream is not well formed: %q", again.Body)
			}
			if n := g.mock("a").Calls() - before; n != 1 {
				t.Fatalf("%d provider calls for two requests", n)
			}
			other := strings.Replace(tc.body, `"hi"`, `"bye"`, 1)
			if a := g.post(tc.path, other, "Idempotency-Key", key); a.Status != 422 || !strings.Contains(a.Body, "Idempotency-Key was already used") {
				t.Fatalf("different body: %d %s", a.Status, a.Body)
			}
		})
	}
	// The key is scoped to the endpoint: the same key on another path runs.
	if a := g.post("/v1/completions", `{"model":"m","prompt":"hi"}`, "Idempotency-Key", "key-unary"); a.Status != 200 || a.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("another endpoint: %d %v", a.Status, a.Header)
	}
	if a := g.post("/v1/chat/completions", chatBody, "Idempotency-Key", strings.Repeat("k", 256)); a.Status != 400 {
		t.Fatalf("overlong key: %d", a.Status)
	}
	if m := g.get("/metrics").Body; !strings.Contains(m, "switchboard_idempotent_replays_total 3") {
		t.Fatal("the three replays are not counted")
	}
}

// 20 concurrent duplicates make one provider call and get one answer.
func TestIdempotencyConcurrentDuplicatesWait(t *testing.T) {
	g := startGateway(t, strings.Replace(mockYAML("m", "a"), "mock: {tokens: 5}", "mock: {tokens: 5, ttft_ms: 300}", 1))
	concurrentDuplicates(t, []string{g.URL}, func() int64 { return g.mock("a").Calls() })
}

func concurrentDuplicates(t *testing.T, urls []string, calls func() int64) {
	t.Helper()
	var wg sync.WaitGroup
	answers := make([]answer, 20)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := send(urls[i%len(urls)], chatBody, "Idempotency-Key", "dup-1")
			if err != nil {
				t.Error(err)
			}
			answers[i] = a
		}()
	}
	wg.Wait()
	replayed := 0
	for _, a := range answers {
		if a.Status != 200 || a.Body != answers[0].Body {
			t.Fatalf("answers differ: %d %q vs %q", a.Status, a.Body, answers[0].Body)
		}
		if a.Header.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
	}
	if n := calls(); n != 1 || replayed != 19 {
		t.Fatalf("%d provider calls, %d replayed", n, replayed)
	}
}

// In queue mode the keys live in Redis: duplicates spread over two
// ingress replicas still make one upstream call.
func TestIdempotencyAcrossIngressReplicas(t *testing.T) {
	duplicatesAcrossIngress(t, singleAt(redistest.Start(t)))
}

func duplicatesAcrossIngress(t *testing.T, at redisAt) {
	yaml := strings.Replace(mockYAML("m", "a"), "mock: {tokens: 5}", "mock: {tokens: 5, ttft_ms: 300}", 1)
	reps := startQueuedAt(t, at, yaml, "", nil, ingressOnly, ingressOnly, workerOnly)
	concurrentDuplicates(t, []string{reps[0].URL, reps[1].URL}, func() int64 { return reps[2].mock("a").Calls() })
}

// A failed answer (5xx) is not stored: the retry with the same key runs
// again and gets the real answer, which is then the one replayed.
func TestIdempotencyFailureNotStored(t *testing.T) {
	yaml := strings.Replace(mockYAML("m", "a"), "mock: {tokens: 5}", "mock: {tokens: 5, fail_first: 1, fail_status: 500}", 1)
	yaml = strings.Replace(yaml, "max_attempts: 2, max_rounds: 2", "max_attempts: 1, max_rounds: 1", 1)
	g := startGateway(t, yaml)
	for i, want := range []struct {
		status   int
		replayed string
	}{{500, ""}, {200, ""}, {200, "true"}} {
		a := g.post("/v1/chat/completions", chatBody, "Idempotency-Key", "after-failure")
		if a.Status != want.status || a.Header.Get("Idempotent-Replayed") != want.replayed {
			t.Fatalf("request %d: %d replayed=%q, want %d replayed=%q: %s", i+1, a.Status,
				a.Header.Get("Idempotent-Replayed"), want.status, want.replayed, a.Body)
		}
	}
	if n := g.mock("a").Calls(); n != 2 {
		t.Fatalf("%d provider calls, want 2 (the failure and its retry)", n)
	}
}
