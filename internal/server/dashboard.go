package server

import (
	"embed"
	"net/http"

	"switchboard/internal/route"
)

//go:embed dashboard/index.html
var dashboardFS embed.FS

// handleDashboard serves the live dashboard page: static, embedded, no
// build step and no CDN. It polls /dashboard/data.
func (s *Server) handleDashboard(w http.ResponseWriter, r *http.Request) {
	b, err := dashboardFS.ReadFile("dashboard/index.html")
	if err != nil {
		writeError(w, OpenAI, &apiError{Status: 500, Type: "server_error", Message: "dashboard missing from the build"})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	// The page loads nothing from elsewhere.
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	_, _ = w.Write(b)
}

type dashPoint struct {
	T    int64    `json:"t"` // unix ms
	TTFT *float64 `json:"ttft"`
	TPS  float64  `json:"tps"`
}

type dashProvider struct {
	Name        string      `json:"name"`
	Model       string      `json:"model"`
	Active      bool        `json:"active"`
	CircuitOpen bool        `json:"circuit_open"`
	Paused      bool        `json:"quota_paused"`
	PauseReason string      `json:"quota_pause_reason,omitempty"`
	Successes   int64       `json:"successes"`
	Errors      int64       `json:"errors"`
	TTFT        *float64    `json:"ttft"`
	TPS         float64     `json:"tps"`
	Score       *float64    `json:"score"`
	Points      []dashPoint `json:"points"`
}

type dashModel struct {
	Name         string         `json:"name"`
	Active       string         `json:"active"`
	RequestCount int64          `json:"request_count"`
	Providers    []dashProvider `json:"providers"`
}

// handleDashboardData serves the dashboard's JSON (behind auth when on).
func (s *Server) handleDashboardData(w http.ResponseWriter, r *http.Request) {
	snap, _ := s.entry(w, r)
	if snap == nil {
		return
	}
	var models []dashModel
	for _, rt := range snap.Routes.Routes() {
		name := rt.Model.Name
		active := route.Measured{Stats: s.Stats}.Active(rt)
		dm := dashModel{Name: name, Active: active, RequestCount: s.Stats.Requests(name)}
		for _, c := range rt.Candidates {
			h := s.Health.Status(c.Provider)
			m := toDetailMetrics(s.Stats.Metrics(name, c.Provider))
			dp := dashProvider{Name: c.Provider, Model: c.Model, Active: c.Provider == active, CircuitOpen: h.CircuitOpen,
				Paused: !h.PausedUntil.IsZero(), PauseReason: h.PauseReason, Successes: h.Successes, Errors: h.Errors,
				TTFT: m.TTFT, TPS: m.TPS, Score: m.Score, Points: []dashPoint{}}
			for _, smp := range s.Stats.Samples(name, c.Provider) {
				dp.Points = append(dp.Points, dashPoint{T: smp.TS.UnixMilli(), TTFT: finite(smp.TTFT), TPS: smp.TPS})
			}
			dm.Providers = append(dm.Providers, dp)
		}
		models = append(models, dm)
	}
	writeJSON(w, http.StatusOK, map[string]any{"timestamp": s.Clock.Now().UnixMilli(), "models": models})
}
