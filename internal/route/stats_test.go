package route

import (
	"math"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/config"
)

func testRoute(auto bool, providers ...string) *Route {
	r := &Route{Model: &config.Model{Name: "m"}, AutoSwitch: auto}
	for _, p := range providers {
		r.Candidates = append(r.Candidates, &Candidate{Provider: p})
	}
	return r
}

func TestScore(t *testing.T) {
	tests := []struct {
		ttft, tps, want float64
	}{
		{1, 100, 0.5 + 0.5},
		{8, 50, 0.25 + 0.25},
		{0.5, 1000, 0.5 + 1.5}, // both halves saturate
		{math.Inf(1), 100, 0.5},
	}
	for _, tc := range tests {
		if got := Score(tc.ttft, tc.tps); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Score(%v, %v) = %v, want %v", tc.ttft, tc.tps, got, tc.want)
		}
	}
}

func TestSlowedProviderLosesAndOrderFollowsScore(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	s := NewStats(clk, 300*time.Second)
	r := testRoute(true, "a", "b", "c")
	sel := Measured{Stats: s}
	// One sample is not enough to score.
	s.Record("m", "b", Sample{TTFT: 0.5, TPS: 105, Tokens: 100})
	if best, sw := s.Best(r, "a"); sw {
		t.Fatalf("switched to %s on unscored data", best)
	}
	for i := 0; i < 3; i++ {
		s.Record("m", "a", Sample{TTFT: 0.5, TPS: 100, Tokens: 100}) // score 1.0
		s.Record("m", "b", Sample{TTFT: 0.5, TPS: 105, Tokens: 100}) // within 10 %
		s.Record("m", "c", Sample{TTFT: 9, TPS: 20, Tokens: 100})
	}
	if _, sw := s.Best(r, "a"); sw {
		t.Fatal("switched on less than a 10 % lead")
	}
	if got := names(sel.Order(r)); got != "a,b,c" {
		t.Fatalf("order = %s", got)
	}
	// a slows down: its own traffic drags its score under b's.
	clk.Advance(time.Second)
	for i := 0; i < 20; i++ {
		s.Record("m", "a", Sample{TTFT: 6, TPS: 15, Tokens: 100})
	}
	best, sw := s.Best(r, "a")
	if !sw || best != "b" {
		t.Fatalf("best = %s, switch = %v", best, sw)
	}
	s.SetActive("m", best)
	if got := names(sel.Order(r)); got != "b,a,c" {
		t.Fatalf("order after the switch = %s", got)
	}
	// Without auto_switch the rest stays in config order.
	r.AutoSwitch = false
	if got := names(sel.Order(r)); got != "b,a,c" {
		t.Fatalf("config order = %s", got)
	}
	// Samples leave the window.
	clk.Advance(301 * time.Second)
	if m := s.Metrics("m", "a"); m.Samples != 0 {
		t.Fatalf("%d samples outlived the window", m.Samples)
	}
}

func TestSamplesBounded(t *testing.T) {
	s := NewStats(clock.NewFake(time.Unix(0, 0)), time.Hour)
	for i := 0; i < 250; i++ {
		s.Record("m", "a", Sample{TTFT: 1, TPS: float64(i), Tokens: 1})
	}
	if m := s.Metrics("m", "a"); m.Samples != MaxSamples {
		t.Fatalf("%d samples kept", m.Samples)
	}
}

func TestSummaries(t *testing.T) {
	clk := clock.NewFake(time.Unix(10_000, 0))
	s := NewStats(clk, time.Hour)
	s.Record("m", "a", Sample{TTFT: 1, TPS: 40, Tokens: 100})
	s.Record("m", "a", Sample{TTFT: 1, TPS: 60, Tokens: 300})
	s.Record("m", "a", Sample{TTFT: 1, TPS: 500, Tokens: 10}) // short: out of percentiles
	s.Record("m", "b", Sample{TTFT: 1, TPS: 10, Tokens: 20})  // under min_tokens
	sums := s.Summaries(clk.Now(), 10*time.Second, 60*time.Second, 100)
	if len(sums) != 1 || sums[0].Provider != "a" || sums[0].N != 3 || sums[0].Tokens != 410 {
		t.Fatalf("summaries = %+v", sums)
	}
	if want := (40.0*100 + 60*300 + 500*10) / 410; math.Abs(sums[0].TPS-want) > 1e-9 || sums[0].P50 != 40 || sums[0].P90 != 60 {
		t.Fatalf("summary = %+v", sums[0])
	}
	clk.Advance(11 * time.Second)
	if len(s.Summaries(clk.Now(), 10*time.Second, 60*time.Second, 0)) != 0 {
		t.Fatal("inactive provider still summarised")
	}
}

func names(cs []*Candidate) string {
	out := ""
	for i, c := range cs {
		if i > 0 {
			out += ","
		}
		out += c.Provider
	}
	return out
}
