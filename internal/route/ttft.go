package route

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// MinTTFTSamples is how many measured first tokens a provider needs before
// its TTFT percentile is trusted (e.g. as a hedge delay).
const MinTTFTSamples = 5

// TTFTPercentile is the q-quantile (nearest rank, 0 < q < 1) of a
// provider's measured TTFT over the sample window. Failed probes (+Inf)
// are left out: they measure an outage, not a delay. ok is false with
// fewer than MinTTFTSamples finite samples.
//
// A censored sample (a hedge won: the TTFT is only known to exceed it)
// keeps its rank, so the slow answers hedges cut short still count as
// slow. When the rank lands on one, the quantile is at least that bound,
// and the bound is the answer (a delay that creeps up, hedge by hedge,
// towards a tail heavier than 1-q: p99 over a 10 % tail ends near the
// tail, as it should). Except near the edge: when at most half of the
// tail's ranks ((1-q)·n/2, at least one) are bounds between the slowest
// measured answer and the rank, the answer is that measured TTFT. Without
// that slack a tail of about 1-q (10 % at p90) put the rank on a bound
// whenever the window happened to hold a few more slow answers than 1-q
// (binomial noise: 4 windows in 10), and each hedge's bound (its delay
// plus the hedge's TTFT) became the next delay: p90 crept from 50 to
// 100 ms within one bench run. With a quarter it still crept now and then
// (p99 TTFT 66-69 ms against 46-51 ms with half).
func (s *Stats) TTFTPercentile(model, provider string, q float64) (d time.Duration, ok bool) {
	ss := s.Samples(model, provider)
	xs := make([]Sample, 0, len(ss))
	for _, x := range ss {
		if !math.IsInf(x.TTFT, 0) && !math.IsNaN(x.TTFT) && x.TTFT >= 0 {
			xs = append(xs, x)
		}
	}
	if len(xs) < MinTTFTSamples {
		return 0, false
	}
	slices.SortStableFunc(xs, func(a, b Sample) int { return cmp.Compare(a.TTFT, b.TTFT) })
	i := max(0, min(int(math.Ceil(q*float64(len(xs))))-1, len(xs)-1))
	at := xs[i].TTFT
	if xs[i].Censored {
		slack := max(1, int((1-q)*float64(len(xs))/2))
		for j := i - 1; j >= 0 && i-j <= slack; j-- {
			if !xs[j].Censored {
				at = xs[j].TTFT
				break
			}
		}
	}
	return time.Duration(at * float64(time.Second)), true
}
