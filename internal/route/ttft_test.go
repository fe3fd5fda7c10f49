package route

import (
	"math"
	"testing"
	"time"

	"switchboard/internal/clock"
)

func TestTTFTPercentile(t *testing.T) {
	tests := []struct {
		name  string
		ttfts []float64
		q     float64
		want  time.Duration
		ok    bool
	}{
		{"too few samples", []float64{0.1, 0.2, 0.3, 0.4}, 0.9, 0, false},
		{"failed probes do not count", []float64{0.1, 0.2, 0.3, 0.4, math.Inf(1), math.Inf(1)}, 0.9, 0, false},
		{"nearest rank p90 of ten", []float64{1, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1}, 0.9, 900 * time.Millisecond, true},
		{"p50 of five", []float64{0.05, 0.01, 0.04, 0.02, 0.03}, 0.5, 30 * time.Millisecond, true},
		{"a failed probe is left out, not the slowest", []float64{0.1, 0.1, 0.1, 0.1, 0.2, math.Inf(1)}, 0.99, 200 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStats(clock.NewFake(time.Unix(1_700_000_000, 0)), time.Minute)
			for _, x := range tt.ttfts {
				s.Record("m", "p", Sample{TTFT: x, Tokens: 10, TPS: 50})
			}
			got, ok := s.TTFTPercentile("m", "p", tt.q)
			if ok != tt.ok || (ok && (got-tt.want).Abs() > time.Microsecond) {
				t.Fatalf("TTFTPercentile = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
