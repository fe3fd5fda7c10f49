package route

import (
	"fmt"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/config"
)

// BenchmarkSelectorOrder is the per-request provider choice: the active
// provider first, then the rest by measured score when the model
// auto-switches (each provider holding a full window of samples).
func BenchmarkSelectorOrder(b *testing.B) {
	for _, n := range []int{1, 3, 8} {
		for _, auto := range []bool{false, true} {
			b.Run(fmt.Sprintf("providers=%d/auto_switch=%v", n, auto), func(b *testing.B) {
				now := time.Now()
				st := NewStats(clock.Real{}, 5*time.Minute)
				r := &Route{Model: &config.Model{Name: "m"}, AutoSwitch: auto}
				for i := range n {
					p := fmt.Sprintf("p%d", i)
					r.Candidates = append(r.Candidates, &Candidate{Provider: p, Type: "openai", Model: "x"})
					for j := range MaxSamples {
						st.Record("m", p, Sample{TTFT: 0.2 + float64(i)/10, TPS: 50 + float64(j%7), Tokens: 200,
							TS: now.Add(-time.Duration(j) * time.Second)})
					}
				}
				pol := Measured{Stats: st}
				b.ReportAllocs()
				for b.Loop() {
					if len(pol.Order(r)) != n {
						b.Fatal("short order")
					}
				}
			})
		}
	}
}

// BenchmarkPolicyOrder is each policy's per-request order over three
// providers with a full window of samples (lowest_cost with prices).
func BenchmarkPolicyOrder(b *testing.B) {
	now := time.Now()
	st := NewStats(clock.Real{}, 5*time.Minute)
	busy := &Busy{}
	for _, policy := range config.RoutingPolicies {
		b.Run(policy, func(b *testing.B) {
			r := &Route{Model: &config.Model{Name: "m"}, Policy: policy}
			for i := range 3 {
				p := fmt.Sprintf("p%d", i)
				r.Candidates = append(r.Candidates, &Candidate{Provider: p, Model: "x", Weight: i + 1, Price: price(float64(i+1), 2)})
				for j := range MaxSamples {
					st.Record("m", p, Sample{TTFT: 0.2 + float64(i)/10, TPS: 50, Tokens: 200, TS: now.Add(-time.Duration(j) * time.Second)})
				}
			}
			sel := &Selector{Stats: st, Busy: busy}
			est := Estimate{Input: 1000, Output: DefaultOutput}
			b.ReportAllocs()
			for b.Loop() {
				if len(sel.Order(r, est)) != 3 {
					b.Fatal("short order")
				}
			}
		})
	}
}
