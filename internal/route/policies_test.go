package route

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/spend"
)

// price is a catalog entry at input/output USD per million tokens.
func price(in, out float64) *spend.Entry {
	return &spend.Entry{Rates: spend.Rates{Input: spend.PerMillion(in), Output: spend.PerMillion(out),
		CacheRead: spend.Unknown, CacheWrite: spend.Unknown, InputMedia: spend.Unknown}, Context: spend.Unknown, MaxOutput: spend.Unknown}
}

// Each policy orders the same three providers a, b, c (b is the
// configured primary, so measured order is b,a,c) from the state set up.
func TestPolicyOrder(t *testing.T) {
	fixed := func(x float64) func() float64 { return func() float64 { return x } }
	tests := []struct {
		name   string
		policy string
		est    Estimate
		setup  func(r *Route, st *Stats, busy *Busy)
		want   string
	}{
		{"measured: primary first, then config order", config.RoutingMeasured, Estimate{}, nil, "b,a,c"},
		{"measured: the measured active choice first", config.RoutingMeasured, Estimate{},
			func(r *Route, st *Stats, _ *Busy) { st.SetActive("m", "c") }, "c,a,b"},
		{"least_busy: fewest in flight first", config.RoutingLeastBusy, Estimate{},
			func(_ *Route, _ *Stats, busy *Busy) {
				busy.Begin("b")
				busy.Begin("b")
				busy.Begin("a")
			}, "c,a,b"},
		{"least_busy: ties keep measured order", config.RoutingLeastBusy, Estimate{},
			func(_ *Route, _ *Stats, busy *Busy) { busy.Begin("a") }, "b,c,a"},
		{"least_busy: a finished attempt no longer counts", config.RoutingLeastBusy, Estimate{},
			func(_ *Route, _ *Stats, busy *Busy) {
				done := busy.Begin("b")
				done()
				done() // a second call is harmless
				busy.Begin("a")
			}, "b,c,a"},
		{"lowest_cost: cheapest for the estimate first, unpriced last", config.RoutingLowestCost, Estimate{Input: 1000, Output: 1000},
			func(r *Route, _ *Stats, _ *Busy) {
				r.Candidates[0].Price = price(3, 15) // a
				r.Candidates[1].Price = nil          // b: unknown
				r.Candidates[2].Price = price(0.5, 1.5)
			}, "c,a,b"},
		{"lowest_cost: the estimate's shape decides (input-heavy vs output-heavy)", config.RoutingLowestCost, Estimate{Input: 100000, Output: 10},
			func(r *Route, _ *Stats, _ *Busy) {
				r.Candidates[0].Price = price(1, 100) // a: cheap input
				r.Candidates[1].Price = price(5, 1)   // b: cheap output
				r.Candidates[2].Price = price(5, 1)
			}, "a,b,c"},
		{"lowest_cost: same price keeps measured order", config.RoutingLowestCost, Estimate{Input: 10, Output: 10},
			func(r *Route, _ *Stats, _ *Busy) {
				for _, c := range r.Candidates {
					c.Price = price(1, 1)
				}
			}, "b,a,c"},
		{"lowest_latency: lowest mean TTFT first, unmeasured last", config.RoutingLowestLatency, Estimate{},
			func(r *Route, st *Stats, _ *Busy) {
				st.Record("m", "a", Sample{TTFT: 0.9, TPS: 500})
				st.Record("m", "c", Sample{TTFT: 0.2, TPS: 10})
				st.Record("m", "c", Sample{TTFT: 0.4, TPS: 10})
			}, "c,a,b"},
		{"lowest_latency: a failed probe counts as infinite", config.RoutingLowestLatency, Estimate{},
			func(r *Route, st *Stats, _ *Busy) {
				st.Record("m", "a", Sample{TTFT: math.Inf(1)})
				st.Record("m", "c", Sample{TTFT: 3})
			}, "c,b,a"},
		{"weighted: the draw picks by weight", config.RoutingWeighted, Estimate{},
			func(r *Route, _ *Stats, _ *Busy) {
				r.Candidates[0].Weight, r.Candidates[1].Weight, r.Candidates[2].Weight = 1, 0, 3
			}, "c,a,b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := NewStats(clock.NewFake(time.Unix(1e9, 0)), time.Minute)
			busy := &Busy{}
			r := &Route{Model: &config.Model{Name: "m"}, Primary: 1, Policy: tt.policy}
			for _, p := range []string{"a", "b", "c"} {
				r.Candidates = append(r.Candidates, &Candidate{Provider: p, Model: p, Weight: 1})
			}
			if tt.setup != nil {
				tt.setup(r, st, busy)
			}
			sel := &Selector{Stats: st, Busy: busy, Rand: fixed(0.5)}
			if got := names(sel.Order(r, tt.est)); got != tt.want {
				t.Errorf("order %s, want %s", got, tt.want)
			}
		})
	}
}

// weighted 3:1 over many requests: the first choice splits within a
// statistical bound (seeded, so the test is deterministic), and an entry
// of weight 0 is never first, always last.
func TestWeightedSplit(t *testing.T) {
	r := &Route{Model: &config.Model{Name: "m"}, Policy: config.RoutingWeighted, Candidates: []*Candidate{
		{Provider: "heavy", Weight: 3}, {Provider: "light", Weight: 1}, {Provider: "spare", Weight: 0}}}
	rng := rand.New(rand.NewPCG(19, 2))
	sel := &Selector{Rand: rng.Float64}
	const n = 4000
	first := map[string]int{}
	for range n {
		o := sel.Order(r, Estimate{})
		if len(o) != 3 || o[2].Provider != "spare" || o[0] == o[1] {
			t.Fatalf("order %s: want heavy and light in some order, then spare", names(o))
		}
		first[o[0].Provider]++
	}
	// 3000 expected; the standard deviation is sqrt(4000·0.75·0.25) ≈ 27.
	if h := first["heavy"]; h < 3000-140 || h > 3000+140 {
		t.Errorf("heavy first %d of %d, want about 3000 (3:1)", h, n)
	}
}

func TestContextLength(t *testing.T) {
	known := &spend.Entry{Context: 128000}
	bigger := &spend.Entry{Context: 200000}
	tests := []struct {
		name string
		cfg  int
		cs   []*Candidate
		want int64
	}{
		{"configured wins", 8000, []*Candidate{{Price: bigger}}, 8000},
		{"largest catalog window", 0, []*Candidate{{Price: known}, {Price: bigger}}, 200000},
		{"one unknown makes it unknown", 0, []*Candidate{{Price: known}, {}}, 0},
		{"unknown window", 0, []*Candidate{{Price: &spend.Entry{Context: spend.Unknown}}}, 0},
	}
	for _, tt := range tests {
		if got := contextLength(&config.Model{ContextLength: tt.cfg}, tt.cs); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}
