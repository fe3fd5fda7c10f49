package route

import (
	"encoding/json"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"switchboard/internal/clock"
)

// MaxSamples bounds the samples kept per provider of a model.
const MaxSamples = 100

// Sample is one measured answer (or probe) of a provider.
type Sample struct {
	// TTFT in seconds; +Inf for a failed probe.
	TTFT float64 `json:"ttft"`
	// TPS is completion tokens per second.
	TPS    float64   `json:"tps"`
	Tokens int       `json:"tokens"`
	TS     time.Time `json:"ts"`
	// Censored: TTFT is only a lower bound, the time the attempt had
	// waited when a hedge beat it and it was cancelled.
	Censored bool
}

// Stats keeps per-model, per-provider samples and each model's active
// provider. It is keyed by names, so it survives config reloads.
type Stats struct {
	clock  clock.Clock
	window atomic.Int64 // sample window, ns
	models sync.Map     // model -> *modelStats
}

type modelStats struct {
	mu        sync.Mutex
	active    string
	providers map[string][]Sample
	requests  atomic.Int64
	fellBack  atomic.Int64
	probing   atomic.Bool
}

// NewStats keeps samples for window.
func NewStats(c clock.Clock, window time.Duration) *Stats {
	s := &Stats{clock: c}
	s.window.Store(int64(window))
	return s
}

// SetWindow changes the sample window (config reload).
func (s *Stats) SetWindow(d time.Duration) { s.window.Store(int64(d)) }

func (s *Stats) model(name string) *modelStats {
	if m, ok := s.models.Load(name); ok {
		return m.(*modelStats)
	}
	m, _ := s.models.LoadOrStore(name, &modelStats{providers: map[string][]Sample{}})
	return m.(*modelStats)
}

// Record adds a sample.
func (s *Stats) Record(model, provider string, smp Sample) {
	if smp.TS.IsZero() {
		smp.TS = s.clock.Now()
	}
	m := s.model(model)
	m.mu.Lock()
	defer m.mu.Unlock()
	ss := append(m.providers[provider], smp)
	if len(ss) > MaxSamples {
		ss = append(ss[:0:0], ss[len(ss)-MaxSamples:]...)
	}
	m.providers[provider] = ss
}

// CountRequest counts a request of model and returns the new count.
func (s *Stats) CountRequest(model string) int64 { return s.model(model).requests.Add(1) }

// Requests is the model's request count.
func (s *Stats) Requests(model string) int64 { return s.model(model).requests.Load() }

// CountFallback counts a request the model handed to its fallbacks.
func (s *Stats) CountFallback(model string) { s.model(model).fellBack.Add(1) }

// FellBack is how many requests the model handed to its fallbacks.
func (s *Stats) FellBack(model string) int64 { return s.model(model).fellBack.Load() }

// Active is the model's active provider ("" = none chosen yet).
func (s *Stats) Active(model string) string {
	m := s.model(model)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.active
}

// SetActive makes provider the model's active provider.
func (s *Stats) SetActive(model, provider string) {
	m := s.model(model)
	m.mu.Lock()
	m.active = provider
	m.mu.Unlock()
}

// Metrics is a provider's windowed measurement.
type Metrics struct {
	// TTFT is the mean time to first token, seconds (+Inf when a recent
	// probe failed).
	TTFT float64
	// TPS is the token-weighted mean tokens per second.
	TPS     float64
	Samples int
	Score   float64
	// Scored is false with fewer than 2 samples.
	Scored bool
}

// Metrics computes a provider's metrics over the sample window.
func (s *Stats) Metrics(model, provider string) Metrics {
	m := s.model(model)
	cut := s.clock.Now().Add(-time.Duration(s.window.Load()))
	m.mu.Lock()
	defer m.mu.Unlock()
	ss := m.providers[provider]
	// Drop samples that left the window, so memory follows the window.
	i := 0
	for i < len(ss) && ss[i].TS.Before(cut) {
		i++
	}
	if i > 0 {
		ss = append(ss[:0:0], ss[i:]...)
		m.providers[provider] = ss
	}
	return metricsOf(ss)
}

func metricsOf(ss []Sample) Metrics {
	out := Metrics{Samples: len(ss)}
	if len(ss) == 0 {
		return out
	}
	var ttft, wsum, tsum, plain float64
	for _, x := range ss {
		ttft += x.TTFT
		wsum += float64(x.Tokens) * x.TPS
		tsum += float64(x.Tokens)
		plain += x.TPS
	}
	out.TTFT = ttft / float64(len(ss))
	if tsum > 0 {
		out.TPS = wsum / tsum
	} else {
		out.TPS = plain / float64(len(ss))
	}
	if len(ss) >= 2 {
		out.Score, out.Scored = Score(out.TTFT, out.TPS), true
	}
	return out
}

// Score is 0.5·min(4/ttft, 1) + 0.5·min(tps/100, 3): a provider answering
// within 4 s gets the whole TTFT half; throughput counts up to 300 tok/s.
func Score(ttft, tps float64) float64 {
	t := 0.0
	if ttft > 0 && !math.IsInf(ttft, 1) {
		t = math.Min(4/ttft, 1)
	} else if ttft == 0 {
		t = 1
	}
	return 0.5*t + 0.5*math.Min(tps/100, 3)
}

// SwitchMargin: a challenger must beat the active provider's score by 10 %.
const SwitchMargin = 1.1

// Best returns the best-scored provider of r and whether it should replace
// the active one (best > active × 1.1, or the active one has no score).
func (s *Stats) Best(r *Route, active string) (best string, switchTo bool) {
	bestScore := -1.0
	activeM := s.Metrics(r.Model.Name, active)
	for _, c := range r.Candidates {
		m := s.Metrics(r.Model.Name, c.Provider)
		if m.Scored && m.Score > bestScore {
			best, bestScore = c.Provider, m.Score
		}
	}
	if best == "" || best == active {
		return best, false
	}
	if !activeM.Scored {
		return best, false
	}
	return best, bestScore > activeM.Score*SwitchMargin
}

// ByScore orders candidates by descending score; unscored keep config order
// after the scored ones.
func (s *Stats) ByScore(model string, cs []*Candidate) []*Candidate {
	type scored struct {
		c     *Candidate
		score float64
		ok    bool
	}
	xs := make([]scored, len(cs))
	for i, c := range cs {
		m := s.Metrics(model, c.Provider)
		xs[i] = scored{c, m.Score, m.Scored}
	}
	sort.SliceStable(xs, func(i, j int) bool {
		if xs[i].ok != xs[j].ok {
			return xs[i].ok
		}
		return xs[i].score > xs[j].score
	})
	out := make([]*Candidate, len(cs))
	for i, x := range xs {
		out[i] = x.c
	}
	return out
}

// Snapshot is the persisted form of one model's state.
type Snapshot struct {
	Active       string              `json:"active_provider"`
	Samples      map[string][]Sample `json:"samples"`
	RequestCount int64               `json:"request_count"`
}

// Export returns every model's state.
func (s *Stats) Export() map[string]Snapshot {
	out := map[string]Snapshot{}
	s.models.Range(func(k, v any) bool {
		m := v.(*modelStats)
		m.mu.Lock()
		snap := Snapshot{Active: m.active, Samples: map[string][]Sample{}, RequestCount: m.requests.Load()}
		for p, ss := range m.providers {
			cp := make([]Sample, len(ss))
			copy(cp, ss)
			snap.Samples[p] = cp
		}
		m.mu.Unlock()
		out[k.(string)] = snap
		return true
	})
	return out
}

// Import restores state (at boot).
func (s *Stats) Import(in map[string]Snapshot) {
	for name, snap := range in {
		m := s.model(name)
		m.mu.Lock()
		m.active = snap.Active
		for p, ss := range snap.Samples {
			if len(ss) > MaxSamples {
				ss = ss[len(ss)-MaxSamples:]
			}
			m.providers[p] = append([]Sample(nil), ss...)
		}
		m.requests.Store(snap.RequestCount)
		m.mu.Unlock()
	}
}

type sampleJSON struct {
	TTFT   *float64  `json:"ttft"`
	TPS    float64   `json:"tps"`
	Tokens int       `json:"tokens"`
	TS     time.Time `json:"ts"`
	// Censored is omitted when false (files written before it read as
	// measured).
	Censored bool `json:"censored,omitempty"`
}

// MarshalJSON writes a failed probe's infinite TTFT as null (JSON has no
// infinity).
func (s Sample) MarshalJSON() ([]byte, error) {
	j := sampleJSON{TPS: s.TPS, Tokens: s.Tokens, TS: s.TS, Censored: s.Censored}
	if !math.IsInf(s.TTFT, 0) && !math.IsNaN(s.TTFT) {
		t := s.TTFT
		j.TTFT = &t
	}
	if math.IsNaN(j.TPS) || math.IsInf(j.TPS, 0) {
		j.TPS = 0
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads null TTFT back as +Inf.
func (s *Sample) UnmarshalJSON(b []byte) error {
	var j sampleJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Sample{TTFT: math.Inf(1), TPS: j.TPS, Tokens: j.Tokens, TS: j.TS, Censored: j.Censored}
	if j.TTFT != nil {
		s.TTFT = *j.TTFT
	}
	return nil
}

// Samples returns a copy of a provider's samples in the window, oldest first.
func (s *Stats) Samples(model, provider string) []Sample {
	s.Metrics(model, provider) // trims samples that left the window
	m := s.model(model)
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Sample(nil), m.providers[provider]...)
}
