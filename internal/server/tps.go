package server

import (
	"fmt"
	"time"

	"switchboard/internal/config"
)

// ReportTPS logs the periodic TPS summary (metrics.tps_log) until stop is
// closed. The interval is re-read from the current config each round.
func (s *Server) ReportTPS(stop <-chan struct{}) {
	for {
		interval := 5 * time.Second
		var tl config.TPSLog
		if snap := s.snap.Load(); snap != nil {
			tl = snap.Config.Metrics.TPSLog
			if tl.Interval != nil {
				interval = tl.Interval.D()
			}
		}
		wait := interval
		if wait <= 0 {
			wait = 5 * time.Second // off: check again later in case a reload turns it on
		}
		c, cancel := s.Clock.After(wait)
		select {
		case <-stop:
			cancel()
			return
		case <-c:
		}
		if interval <= 0 || !s.trackingOn() {
			continue
		}
		minTokens := 500
		if tl.MinTokens != nil {
			minTokens = *tl.MinTokens
		}
		for _, sum := range s.Stats.Summaries(s.Clock.Now(), tl.ActivityWindow.D(), tl.EvalWindow.D(), minTokens) {
			star := ""
			if !sum.Weighted {
				star = "*"
			}
			s.Log.Info(fmt.Sprintf("[tps] %s/%s tps=%.1f%s p50=%.1f p90=%.1f n=%d tokens=%d",
				sum.Model, sum.Provider, sum.TPS, star, sum.P50, sum.P90, sum.N, sum.Tokens))
		}
	}
}

func (s *Server) trackingOn() bool {
	snap := s.snap.Load()
	return snap != nil && snap.Config.Tracking.On()
}
