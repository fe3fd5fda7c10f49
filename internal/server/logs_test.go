package server

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchboard/internal/provider/mock"
)

// TestStreamLogsCarryRealCountsAndPercentiles: with answers shorter than
// 50 tokens (the demo's 40), the [tps] line still shows p50/p90, and each
// stream's Success line carries the provider's prompt and completion
// counts although the client did not ask for usage (nor sees it).
func TestStreamLogsCarryRealCountsAndPercentiles(t *testing.T) {
	yaml := strings.Replace(mockYAML("m", "a"), "mock: {tokens: 5}", "mock: {tokens: 20, ttft_ms: 5, tokens_per_second: 500}", 1) +
		"metrics: {tps_log: {interval: 0.2, min_tokens: 10}}\n"
	g := startGateway(t, yaml)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { g.ReportTPS(stop); close(done) }()
	defer func() { close(stop); <-done }()
	for range 3 {
		resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range readStream(t, resp) {
			if gjson.Get(e, "usage").IsObject() {
				t.Fatalf("the client got a usage chunk it did not ask for: %s", e)
			}
		}
	}
	success := regexp.MustCompile(`Success \| content=20 .* prompt_tokens=([1-9]\d*) completion_tokens=20`)
	tps := regexp.MustCompile(`\[tps\] m/a tps=[1-9][\d.]* p50=([1-9][\d.]*) p90=([1-9][\d.]*) n=3 tokens=60`)
	waitFor(t, func() bool { return tps.MatchString(g.logs.String()) })
	if n := len(success.FindAllString(g.logs.String(), -1)); n != 3 {
		t.Fatalf("%d stream success lines with real counts, want 3:\n%s", n, g.logs.String())
	}
}

// A client that leaves before any answer was written (the provider still
// thinking) is logged as status=499 in the access log and counted under
// status "499" in switchboard_requests_total, as its usage row is: not as
// the 200 nothing was sent with.
func TestClientGoneBeforeAnswerIsLogged499(t *testing.T) {
	tests := []struct{ name, path, body string }{
		{"unary", "/v1/chat/completions", chatBody},
		{"stream", "/v1/chat/completions", streamBody},
		{"messages", "/v1/messages", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := startGateway(t, mockYAML("m", "a"))
			g.mock("a").Script(mock.Fault{Hang: true})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+tt.path, strings.NewReader(tt.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("anthropic-version", "2023-06-01")
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			waitFor(t, func() bool { return g.mock("a").Calls() == 1 })
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the canceled request got an answer")
			}
			line := regexp.MustCompile(`msg=request method=POST path=` + regexp.QuoteMeta(tt.path) + ` status=(\d+)`)
			var m []string
			waitFor(t, func() bool { m = line.FindStringSubmatch(g.logs.String()); return m != nil })
			if m[1] != "499" {
				t.Errorf("access log status=%s, want 499:\n%s", m[1], g.logs.String())
			}
			want := `switchboard_requests_total{route="` + tt.path + `",status="499"} 1`
			if met := g.get("/metrics").Body; !strings.Contains(met, want) {
				t.Errorf("metrics lack %s:\n%s", want, grep(met, "switchboard_requests_total"))
			}
		})
	}
}
