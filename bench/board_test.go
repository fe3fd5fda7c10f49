package main

import (
	"encoding/json"
	"math"
	"testing"
)

// TestPadBody: a padded body is still the same chat request (valid JSON,
// same messages, same model), grown to the size asked.
func TestPadBody(t *testing.T) {
	base := requestBody(false, 16, 0)
	for _, size := range []int{0, len(base) - 1, 4096, 64 << 10} {
		b := padBody(requestBody(false, 16, 0), size)
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		want := max(size, len(base))
		if len(b) != want || req.Model != benchModel || len(req.Messages) != 4 {
			t.Errorf("size %d: got %d bytes, model %q, %d messages", size, len(b), req.Model, len(req.Messages))
		}
	}
}

// TestFrontier: the frontier keeps, per bound, the fastest level under
// it, and never a level that failed a request.
func TestFrontier(t *testing.T) {
	ps := []SweepPoint{
		{Conc: 1, RPS: 1000, P99: 0.8, OK: 1},
		{Conc: 4, RPS: 3000, P99: 3, OK: 1},
		{Conc: 16, RPS: 5000, P99: 9, OK: 1, Errors: 1},
		{Conc: 64, RPS: 4500, P99: 40, OK: 1},
	}
	got := frontier(ps)
	want := map[float64]int{1: 1, 5: 4, 10: 4, 50: 64}
	for _, f := range got {
		if f.Conc != want[f.P99BoundMs] {
			t.Errorf("p99 < %g ms: c%d (%v rps), want c%d", f.P99BoundMs, f.Conc, f.RPS, want[f.P99BoundMs])
		}
	}
}

// TestBoardChecksFinite: a frontier the bare proxy never reached, or a
// missing baseline figure, gives a finite value (the report is JSON).
func TestBoardChecksFinite(t *testing.T) {
	tr := func(rps float64, peak int64) *TargetResult {
		return &TargetResult{Frontier: []FrontierPoint{{P99BoundMs: 5, RPS: rps}, {P99BoundMs: 50, RPS: rps}}, PeakOpen: peak}
	}
	r := &Report{Modes: []*ModeResult{
		{Mode: Mode{Role: "frontier", Name: "frontier"}, Targets: map[string]*TargetResult{"direct": tr(9, 0), "baseline": tr(0, 0), "gateway": tr(5, 0)}},
		{Mode: Mode{Role: "streams-held", Name: "streams"}, Targets: map[string]*TargetResult{"direct": tr(0, 9), "baseline": tr(0, 0), "gateway": tr(0, 9)}},
	}}
	cs := boardChecks(r)
	if len(cs) != 3 {
		t.Fatalf("%d checks, want 3", len(cs))
	}
	for _, c := range cs {
		if math.IsInf(c.Value, 0) || math.IsNaN(c.Value) {
			t.Errorf("%s: value %v", c.Name, c.Value)
		}
	}
	if _, err := json.Marshal(cs); err != nil {
		t.Fatal(err)
	}
}
