package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	fake "switchboard/e2e/upstream"
)

// BenchmarkTranslationCost measures one request through the gateway per
// inbound protocol against one fake upstream: the pair whose protocols
// match goes untranslated, the others are translated both ways, so the
// difference in ns/op against the native pair of the same upstream is
// what translation adds (the upstream's own work is the same). Run by
// ./scripts/bench --translation; BENCHMARKS.md has the figures.
//
// cpu-µs/op is the process's CPU time (user + system) per request:
// the gateway's, the client's and the fake upstream's, all in this
// process. Wall time on a machine shared with other work moves by several
// times from run to run; CPU time much less.
func BenchmarkTranslationCost(b *testing.B) {
	for _, v := range []fake.Vendor{fake.Anthropic, fake.Gemini, fake.OpenAI} {
		up := fake.New(v, fake.Options{Key: protoUpKey})
		b.Cleanup(up.Close)
		g := startGateway(b, fmt.Sprintf(`providers:
  up: {type: %s, base_url: %q, api_key: %q}
models:
  - name: m
    providers: [{provider: up, model: %s}]
auth: {token: %q}
retries: {max_attempts: 1, max_rounds: 1}
logging: {level: warn}
`, v, up.BaseURL(), protoUpKey, protoUpModel, protoKey))
		client := &http.Client{}
		for _, in := range inbounds {
			for _, stream := range []bool{false, true} {
				kind := "translated"
				if in.vendor == v && !(in.name == "chat" && v != fake.OpenAI) {
					kind = "native"
				}
				b.Run(fmt.Sprintf("%s/%s/stream=%t/%s", v, in.name, stream, kind), func(b *testing.B) {
					url, body := g.URL+in.path(stream), in.body(stream)
					cpu0 := processCPU()
					for b.Loop() {
						req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
						req.Header.Set("Authorization", "Bearer "+protoKey)
						req.Header.Set("Content-Type", "application/json")
						resp, err := client.Do(req)
						if err != nil {
							b.Fatal(err)
						}
						n, _ := io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 || n == 0 {
							b.Fatalf("status %d", resp.StatusCode)
						}
						up.Reset()
					}
					// CPU time per request (gateway, client and fake in this
					// process): steadier than wall time on a shared machine.
					b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
				})
			}
		}
	}
}

// processCPU is this process's user + system CPU time in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
