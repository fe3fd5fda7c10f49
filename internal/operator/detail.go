package operator

import (
	"math"
	"net/http"
	"time"

	"switchboard/internal/front"
	"switchboard/internal/route"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
)

// detailMetrics are a provider's windowed measurements; TTFT is null when
// unknown or when recent probes failed.
type detailMetrics struct {
	TTFT        *float64 `json:"ttft"`
	TPS         float64  `json:"tps"`
	SampleCount int      `json:"sample_count"`
	Score       *float64 `json:"score"`
}

type detailProvider struct {
	Errors                int64         `json:"errors"`
	Successes             int64         `json:"successes"`
	CircuitOpen           bool          `json:"circuit_open"`
	LastSuccessAt         *time.Time    `json:"last_success_at"`
	LastSuccessAgeSeconds *float64      `json:"last_success_age_seconds"`
	QuotaPaused           bool          `json:"quota_paused"`
	QuotaPauseUntil       *time.Time    `json:"quota_pause_until"`
	QuotaPauseReason      *string       `json:"quota_pause_reason"`
	Metrics               detailMetrics `json:"metrics"`
}

type detailModel struct {
	// ActiveProvider is the one serving now: the first in the attempt
	// order that may take a request (an open circuit or a pause skips
	// it); PreferredProvider the routing choice, healthy or not.
	ActiveProvider    string                    `json:"active_provider"`
	PreferredProvider string                    `json:"preferred_provider"`
	Metrics           detailMetrics             `json:"metrics"`
	RequestCount      int64                     `json:"request_count"`
	Providers         map[string]detailProvider `json:"providers"`
	// Routing is the model's policy (measured, weighted, least_busy,
	// lowest_cost, lowest_latency).
	Routing string `json:"routing"`
}

func finite(f float64) *float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil
	}
	return &f
}

func toDetailMetrics(m route.Metrics) detailMetrics {
	d := detailMetrics{TPS: m.TPS, SampleCount: m.Samples}
	if m.Samples > 0 {
		d.TTFT = finite(m.TTFT)
	}
	if m.Scored {
		d.Score = finite(m.Score)
	}
	return d
}

// HealthDetail serves GET /v1/health/detail (behind auth when on).
// Providers, their health and the gateway's traffic are shown to admins
// (and to everyone when auth is off); a tenant gets the status and the
// models it may call (its own usage is GET /v1/usage).
func (s *Plane) HealthDetail(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
	now := s.Clock.Now()
	status := "ok"
	if s.Draining() {
		status = "draining"
	}
	models := make([]string, 0, len(snap.Config.Models))
	for _, rt := range snap.Routes.Routes() {
		if id.MayUse(rt.Model.Name) { // a key limited to some models sees only those
			models = append(models, rt.Model.Name)
		}
	}
	if !tenant.Operator(id) {
		front.WriteJSON(w, http.StatusOK, map[string]any{"status": status, "models": models, "timestamp": now.UTC()})
		return
	}
	out := map[string]detailModel{}
	for _, rt := range snap.Routes.Routes() {
		name := rt.Model.Name
		active := s.serving(rt)
		dm := detailModel{ActiveProvider: active, PreferredProvider: s.Selector.Preferred(rt), Routing: rt.Policy, RequestCount: s.Stats.Requests(name),
			Metrics: toDetailMetrics(s.Stats.Metrics(name, active)), Providers: map[string]detailProvider{}}
		for _, c := range rt.Candidates {
			h := s.Health.Status(c.Provider)
			dp := detailProvider{Errors: h.Errors, Successes: h.Successes, CircuitOpen: h.CircuitOpen,
				Metrics: toDetailMetrics(s.Stats.Metrics(name, c.Provider))}
			if !h.LastSuccess.IsZero() {
				t := h.LastSuccess.UTC()
				age := now.Sub(h.LastSuccess).Seconds()
				dp.LastSuccessAt, dp.LastSuccessAgeSeconds = &t, &age
			}
			if !h.PausedUntil.IsZero() {
				t := h.PausedUntil.UTC()
				reason := h.PauseReason
				dp.QuotaPaused, dp.QuotaPauseUntil, dp.QuotaPauseReason = true, &t, &reason
			}
			dm.Providers[c.Provider] = dp
		}
		out[name] = dm
	}
	body := map[string]any{"status": status, "models": models, "providers": out, "timestamp": now.UTC()}
	if s.QueueDetail != nil {
		body["queue"] = s.QueueDetail(r.Context())
	}
	front.WriteJSON(w, http.StatusOK, body)
}

// serving is the provider a request of rt would go to now: the first in
// the attempt order whose circuit and pause let it take one; when none may,
// the first of the order (the loop then tries them all).
func (s *Plane) serving(rt *route.Route) string {
	order := s.Selector.Likely(rt)
	for _, c := range order {
		if s.Health.Available(c.Provider) {
			return c.Provider
		}
	}
	if len(order) > 0 {
		return order[0].Provider
	}
	return ""
}
