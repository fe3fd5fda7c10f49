package route

import (
	"math"
	"sort"
	"time"
)

// Summary is one provider's periodic TPS line.
type Summary struct {
	Model, Provider string
	// TPS is token-weighted: sum(tokens·tps)/sum(tokens); Weighted is false
	// when no sample had a token count and TPS is the median instead.
	TPS      float64
	Weighted bool
	P50, P90 float64
	N        int
	Tokens   int
}

// minPercentileTokens: shorter samples are TTFT-dominated noise.
const minPercentileTokens = 50

// Summaries returns a summary per provider with a sample in the activity
// window, over the samples of the eval window, dropping providers with
// fewer than minTokens tokens in it.
func (s *Stats) Summaries(now time.Time, activity, eval time.Duration, minTokens int) []Summary {
	var out []Summary
	s.models.Range(func(k, v any) bool {
		m := v.(*modelStats)
		m.mu.Lock()
		for p, ss := range m.providers {
			var recent []Sample
			active := false
			for _, x := range ss {
				if math.IsInf(x.TTFT, 1) || x.Tokens == 0 {
					continue // failed probes and hedged-away waits carry no throughput
				}
				if !x.TS.Before(now.Add(-eval)) {
					recent = append(recent, x)
				}
				if !x.TS.Before(now.Add(-activity)) {
					active = true
				}
			}
			if !active || len(recent) == 0 {
				continue
			}
			sum := summarize(recent)
			if sum.Tokens < minTokens {
				continue
			}
			sum.Model, sum.Provider = k.(string), p
			out = append(out, sum)
		}
		m.mu.Unlock()
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Model != out[j].Model {
			return out[i].Model < out[j].Model
		}
		return out[i].Provider < out[j].Provider
	})
	return out
}

func summarize(ss []Sample) Summary {
	sum := Summary{N: len(ss)}
	var w float64
	var long []float64
	all := make([]float64, 0, len(ss))
	for _, x := range ss {
		sum.Tokens += x.Tokens
		w += float64(x.Tokens) * x.TPS
		all = append(all, x.TPS)
		if x.Tokens >= minPercentileTokens {
			long = append(long, x.TPS)
		}
	}
	if sum.Tokens > 0 {
		sum.TPS, sum.Weighted = w/float64(sum.Tokens), true
	} else {
		sum.TPS = percentile(all, 0.5)
	}
	if len(long) == 0 {
		// Only short answers (a demo's 40 tokens): their rates are noisier
		// but still the rates there are, not zero.
		long = all
	}
	sum.P50, sum.P90 = percentile(long, 0.5), percentile(long, 0.9)
	return sum
}

// percentile is the nearest-rank percentile; 0 for no values.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
