package operator

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"switchboard/internal/admit"
	"switchboard/internal/front"
	"switchboard/internal/snapshot"
	"switchboard/internal/spend"
	"switchboard/internal/tenant"
	"switchboard/internal/usagelog"
)

// Dashboard serves the live dashboard page: static, embedded, no
// build step and no CDN. It polls /dashboard/data.
func (s *Plane) Dashboard(w http.ResponseWriter, r *http.Request) {
	servePage(w, "dashboard/index.html")
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
	Name         string `json:"name"`
	Active       string `json:"active,omitempty"` // serving now (see serving)
	Preferred    string `json:"preferred,omitempty"`
	Routing      string `json:"routing,omitempty"` // the model's routing policy
	RequestCount int64  `json:"request_count"`
	// Fallbacks are the models tried in turn when this one fails with a
	// condition of FallbackOn; FellBack counts the requests it handed to
	// them since start (each once, however many it tried).
	Fallbacks  []string       `json:"fallbacks,omitempty"`
	FallbackOn []string       `json:"fallback_on,omitempty"`
	FellBack   int64          `json:"fell_back,omitempty"`
	Providers  []dashProvider `json:"providers"`
}

// dashTenant is one tenant's spend in its current budget window: what
// its settled attempts cost (spent) apart from what attempts still hold
// (reserved, or kept by an uncertain end); the budget counts both.
type dashTenant struct {
	Tenant        string       `json:"tenant"`
	SpentUSD      json.Number  `json:"spent_usd"` // settled
	HeldUSD       json.Number  `json:"held_usd"`  // reserved
	BudgetUSD     *json.Number `json:"budget_usd"`
	WindowEnd     int64        `json:"window_end"`
	RequestsToday int64        `json:"requests_today"`
	usedNano      int64        // spent + held, for the order
}

// DashboardData serves the dashboard's JSON (behind auth when on).
// Admins (everyone when auth is off) get providers, traffic and every
// tenant's spend against its budget; a tenant gets the model names and
// its own usage.
func (s *Plane) DashboardData(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
	now := s.Clock.Now().UnixMilli()
	if !tenant.Operator(id) {
		models := make([]dashModel, 0, len(snap.Config.Models))
		for _, rt := range snap.Routes.Routes() {
			if id.MayUse(rt.Model.Name) {
				models = append(models, dashModel{Name: rt.Model.Name, Providers: []dashProvider{}})
			}
		}
		out := map[string]any{"timestamp": now, "role": "tenant", "models": models}
		if u, err := s.Admission.Usage(r.Context(), id, admit.UsageOptions{Advisory: snap.Advisory, ByModel: true}); err == nil {
			out["usage"] = u
		}
		front.WriteJSON(w, http.StatusOK, out)
		return
	}
	var models []dashModel
	for _, rt := range snap.Routes.Routes() {
		name := rt.Model.Name
		active := s.serving(rt)
		dm := dashModel{Name: name, Active: active, Preferred: s.Selector.Preferred(rt), Routing: rt.Policy, RequestCount: s.Stats.Requests(name),
			FellBack: s.Stats.FellBack(name)}
		if fb := rt.Model.Fallbacks; fb != nil {
			dm.Fallbacks, dm.FallbackOn = fb.Models, fb.On
		}
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
	all := s.Admission.Tenants()
	front.WriteJSON(w, http.StatusOK, map[string]any{"timestamp": now, "role": "admin", "models": models,
		"tenants": s.tenantSpend(r.Context(), all), "tenants_total": len(all), "tenants_truncated": len(all) > MaxDashTenants,
		"events": s.dashEvents()})
}

// tenantSpend lists the spend of the tenants topTenants picks from all,
// the biggest spend in the current window first; a tenant whose usage
// cannot be read (store down) is left out. The usage log ranks them only
// when they do not all fit, so the common poll costs no query; a failed
// query falls back to the cut by name.
func (s *Plane) tenantSpend(ctx context.Context, all []*tenant.Identity) []dashTenant {
	var byTenant map[string]usagelog.Group
	if ul := s.UsageLog(); ul != nil && len(all) > MaxDashTenants {
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		byTenant, _ = groupsBy(qctx, ul.DB(), usagelog.Filter{From: s.Clock.Now().Add(-overviewWindow)}, "tenant")
		cancel()
	}
	out := []dashTenant{}
	for _, id := range topTenants(all, byTenant) {
		u, err := s.Admission.Usage(ctx, id, admit.UsageOptions{})
		if err != nil || u.Spend == nil {
			continue
		}
		sp := u.Spend
		out = append(out, dashTenant{Tenant: id.Tenant, SpentUSD: json.Number(spend.FormatUSD(sp.SettledNano)),
			HeldUSD: json.Number(spend.FormatUSD(sp.ReservedNano)), BudgetUSD: sp.BudgetUSD, WindowEnd: sp.WindowEnd,
			RequestsToday: u.RequestsToday, usedNano: sp.ReservedNano + sp.SettledNano})
	}
	// Stable: equal spend keeps topTenants' order.
	slices.SortStableFunc(out, func(a, b dashTenant) int { return cmp.Compare(b.usedNano, a.usedNano) })
	return out
}

// dashEvent is one circuit or pause transition, for the dashboard.
type dashEvent struct {
	T        int64  `json:"t"` // unix ms
	Provider string `json:"provider"`
	Kind     string `json:"kind"`
	Reason   string `json:"reason,omitempty"`
	Until    int64  `json:"until,omitempty"` // unix ms, pauses
	Fleet    bool   `json:"fleet,omitempty"`
}

func (s *Plane) dashEvents() []dashEvent {
	ts := s.Health.Transitions()
	out := make([]dashEvent, 0, len(ts))
	for _, t := range ts {
		e := dashEvent{T: t.Time.UnixMilli(), Provider: t.Provider, Kind: t.Kind, Reason: t.Reason, Fleet: t.Fleet}
		if !t.Until.IsZero() {
			e.Until = t.Until.UnixMilli()
		}
		out = append(out, e)
	}
	return out
}
