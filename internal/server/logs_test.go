package server

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
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
