package route

import (
	"math"
	"time"
)

// MinTTFTSamples is how many measured first tokens a provider needs before
// its TTFT percentile is trusted (e.g. as a hedge delay).
const MinTTFTSamples = 5

// TTFTPercentile is the q-quantile (nearest rank, 0 < q < 1) of a
// provider's measured TTFT over the sample window. Failed probes (+Inf)
// are left out: they measure an outage, not a delay. ok is false with
// fewer than MinTTFTSamples finite samples.
func (s *Stats) TTFTPercentile(model, provider string, q float64) (d time.Duration, ok bool) {
	ss := s.Samples(model, provider)
	xs := make([]float64, 0, len(ss))
	for _, x := range ss {
		if !math.IsInf(x.TTFT, 0) && !math.IsNaN(x.TTFT) && x.TTFT >= 0 {
			xs = append(xs, x.TTFT)
		}
	}
	if len(xs) < MinTTFTSamples {
		return 0, false
	}
	return time.Duration(percentile(xs, q) * float64(time.Second)), true
}
