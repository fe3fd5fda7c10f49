package inference

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"switchboard/internal/front"
	"switchboard/internal/proxy"
	"switchboard/internal/redact"
	"switchboard/internal/route"
	"switchboard/internal/track"
)

// finishStream records a relayed stream's end: its outcome (counted; logged
// unless it completed), a routing sample, the TTFT and TPS histograms, and
// the per-request stats line. Only a completed stream logs Success or
// feeds routing: a stream its client abandoned or the drain cut is not a
// measurement of the provider.
func (s *Plane) finishStream(ctx context.Context, rt *route.Route, res *proxy.Result, st *track.Stream, outcome string) {
	rt = servedRoute(res, rt)
	defer s.Prober.AfterRequest(rt)
	s.Proxy.SettleStream(ctx, res, st)
	traceStream(res, st, outcome)
	p := res.Candidate.Provider
	s.Metrics.Streams.WithLabelValues(p, res.Candidate.Model, outcome).Inc()
	if outcome != streamCompleted {
		lvl := slog.LevelWarn
		if outcome == streamAbandoned {
			lvl = slog.LevelInfo // the client's choice, not a fault
		}
		s.Log.LogAttrs(ctx, lvl, fmt.Sprintf("[%s/%s] Stream %s", rt.Model.Name, p, outcome),
			slog.String("model", rt.Model.Name), slog.String("provider", p), slog.String("outcome", outcome),
			slog.Duration("duration", s.Clock.Now().Sub(res.Sent)))
		return
	}
	if st == nil {
		return
	}
	m := st.Result()
	if m.TTFT > 0 {
		s.Metrics.UpstreamTTFT.WithLabelValues(p, res.Candidate.Model).Observe(m.TTFT.Seconds())
	}
	if m.TotalTPS > 0 {
		s.Metrics.UpstreamTPS.WithLabelValues(p, res.Candidate.Model).Observe(m.TotalTPS)
	}
	if m.Tokens > 0 && m.TTFT > 0 {
		s.Stats.Record(rt.Model.Name, p, route.Sample{TTFT: m.TTFT.Seconds(), TPS: m.TotalTPS, Tokens: m.Tokens})
	}
	if !s.Log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	s.Log.LogAttrs(ctx, slog.LevelInfo, fmt.Sprintf("[%s/%s] Success | content=%d thinking=%d ttft=%.3fs content_tps=%.1f thinking_tps=%.1f total_tps=%.1f",
		rt.Model.Name, p, m.Content, m.Thinking, m.TTFT.Seconds(), m.ContentTPS, m.ThinkingTPS, m.TotalTPS),
		slog.String("model", rt.Model.Name), slog.String("provider", p), slog.Bool("server_timing", m.ServerTiming),
		slog.Int64("prompt_tokens", st.Usage.Input), slog.Int64("completion_tokens", st.Usage.Output))
}

// answerUnary writes a whole answer and records it. Probes are scheduled
// before the write (so they are under way by the time the client has its
// answer); the log line comes after it, off the client's wait.
func (s *Plane) answerUnary(ctx context.Context, w http.ResponseWriter, rt *route.Route, res *proxy.Result, status int, body []byte) {
	rt = servedRoute(res, rt)
	s.Prober.AfterRequest(rt)
	front.WriteUnary(w, status, s.secrets().Bytes(body))
	if !s.Log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	u := res.Usage
	s.Log.LogAttrs(ctx, slog.LevelInfo, fmt.Sprintf("[%s/%s] Success", rt.Model.Name, res.Candidate.Provider),
		slog.String("model", rt.Model.Name), slog.String("provider", res.Candidate.Provider),
		slog.Duration("latency", s.Clock.Now().Sub(res.Sent)),
		slog.Int64("prompt_tokens", u.Input), slog.Int64("completion_tokens", u.Output))
}

// secrets returns the current config's provider keys to mask.
func (s *Plane) secrets() *redact.Secrets {
	if snap := s.Snap(); snap != nil {
		return snap.Secrets
	}
	return nil
}
