package route

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"switchboard/internal/clock"
)

func TestTTFTPercentile(t *testing.T) {
	tests := []struct {
		name  string
		ttfts []float64
		cut   []bool // censored samples: a hedge won
		q     float64
		want  time.Duration
		ok    bool
	}{
		{"too few samples", []float64{0.1, 0.2, 0.3, 0.4}, nil, 0.9, 0, false},
		{"failed probes do not count", []float64{0.1, 0.2, 0.3, 0.4, math.Inf(1), math.Inf(1)}, nil, 0.9, 0, false},
		{"nearest rank p90 of ten", []float64{1, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1}, nil, 0.9, 900 * time.Millisecond, true},
		{"p50 of five", []float64{0.05, 0.01, 0.04, 0.02, 0.03}, nil, 0.5, 30 * time.Millisecond, true},
		{"a failed probe is left out, not the slowest", []float64{0.1, 0.1, 0.1, 0.1, 0.2, math.Inf(1)}, nil, 0.99, 200 * time.Millisecond, true},
		// Nine measured answers and two hedged ones cut short at 0.05 s:
		// p90 (rank 10 of 11) is on the first bound, at the edge of the
		// tail: the slowest measured one, not the bound.
		{"a bound at the edge gives the measured TTFT below it", []float64{0.02, 0.021, 0.022, 0.023, 0.024, 0.025, 0.026, 0.027, 0.028, 0.05, 0.05},
			[]bool{false, false, false, false, false, false, false, false, false, true, true}, 0.9, 28 * time.Millisecond, true},
		// 40 measured, 10 bounds: p90 (rank 45) is 5 bounds deep, more than
		// a quarter of the tail's 5 ranks: the tail is heavier than 10 %
		// and the delay is at least the bound.
		{"a bound deep in a heavy tail is the answer", append(repeat(0.02, 40), repeat(0.06, 10)...),
			append(make([]bool, 40), repeatBool(true, 10)...), 0.9, 60 * time.Millisecond, true},
		// Bounds keep their rank: leaving them out would make p50 that of
		// the four measured ones (0.021); rank 4 is the first bound, at
		// the edge, so the measured answer below it.
		{"bounds keep their rank", []float64{0.02, 0.021, 0.022, 0.5, 0.06, 0.06, 0.06},
			[]bool{false, false, false, false, true, true, true}, 0.5, 22 * time.Millisecond, true},
		{"a measured slow answer above bounds counts", []float64{0.02, 0.021, 0.022, 0.023, 0.05, 0.5},
			[]bool{false, false, false, false, true, false}, 0.9, 500 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStats(clock.NewFake(time.Unix(1_700_000_000, 0)), time.Minute)
			for i, x := range tt.ttfts {
				s.Record("m", "p", Sample{TTFT: x, Tokens: 10, TPS: 50, Censored: tt.cut != nil && tt.cut[i]})
			}
			got, ok := s.TTFTPercentile("m", "p", tt.q)
			if ok != tt.ok || (ok && (got-tt.want).Abs() > time.Microsecond) {
				t.Fatalf("TTFTPercentile = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestCensoredSurvivesJSON: samples shared through the fleet's store keep
// their censored mark (a replica reading bounds as measurements would
// ratchet its hedge delay).
func TestCensoredSurvivesJSON(t *testing.T) {
	in := []Sample{{TTFT: 0.05, Censored: true}, {TTFT: 0.02}, {TTFT: math.Inf(1)}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out []Sample
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || !out[0].Censored || out[1].Censored || out[2].Censored || !math.IsInf(out[2].TTFT, 1) {
		t.Fatalf("%s -> %+v", b, out)
	}
	if strings.Contains(string(b[bytes.IndexByte(b, '}'):]), "censored") {
		t.Errorf("a measured sample carries the mark: %s", b)
	}
}

func repeat(x float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = x
	}
	return out
}

func repeatBool(b bool, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = b
	}
	return out
}
