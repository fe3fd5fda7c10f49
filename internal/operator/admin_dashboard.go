package operator

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"time"

	"switchboard/internal/admit"
	"switchboard/internal/front"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
	"switchboard/internal/usagelog"
)

// The admin page: tenants and keys with spend against budget and
// rate-limit headroom, and usage by model over time. The page is static
// (embedded, like /dashboard); its data is GET /admin/v1/overview, behind
// the admin guard.

// MaxOverviewKeys bounds the keys listed (one row each). A variable so
// that tests can lower it.
var MaxOverviewKeys = 1000

// AdminPage serves the admin page (its data needs an admin key).
func (s *Plane) AdminPage(w http.ResponseWriter, r *http.Request) {
	servePage(w, "dashboard/admin.html")
}

type overviewKey struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Tenant string `json:"tenant"`
	Role   string `json:"role"`
	Origin string `json:"origin"`
	// Requests and CostNano over the last 24 h, from the usage log.
	Requests int64 `json:"requests_24h"`
	CostNano int64 `json:"cost_nano_usd_24h"`
	// Limits and Spend: the key's own limits (with what remains) and
	// budget used, in its own ledger, as /v1/usage's key; absent when the
	// key has none.
	Limits map[string]admit.Counter `json:"limits,omitempty"`
	Spend  *admit.SpendView         `json:"spend,omitempty"`
}

type overviewTenant struct {
	Tenant string `json:"tenant"`
	Keys   int    `json:"keys"`
	// Limits: rpm, tpm, daily_requests, each with its limit and what
	// remains now (the headroom); absent when unlimited.
	Limits        map[string]admit.Counter `json:"limits"`
	RequestsToday int64                    `json:"requests_today"`
	Spend         *admit.SpendView         `json:"spend"`
	// Requests24h and CostNano24h come from the usage log.
	Requests24h int64 `json:"requests_24h"`
	CostNano24h int64 `json:"cost_nano_usd_24h"`
}

// Overview serves GET /admin/v1/overview.
func (s *Plane) Overview(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, _ *tenant.Identity) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	now := s.Clock.Now()
	since := now.Add(-overviewWindow)
	var byKey, byTenant map[string]usagelog.Group
	var series []usagelog.Group
	ul := s.UsageLog()
	logOn := ul != nil
	if logOn {
		db := ul.DB()
		f := usagelog.Filter{From: since}
		var err error
		if byKey, err = groupsBy(ctx, db, f, "key"); err == nil {
			if byTenant, err = groupsBy(ctx, db, f, "tenant"); err == nil {
				series, err = db.Summarize(ctx, f, []string{"hour", "model"})
			}
		}
		if err != nil {
			s.queryFailed(w, r, err)
			return
		}
	}
	// Keys and tenants are cut to their caps by 24 h cost, not by name,
	// so that a big spender late in the alphabet is never the one left
	// out; *_total and *_truncated say when the lists are cut.
	keys := []overviewKey{}
	perTenant := map[string]int{}
	if t := s.Admission.Keys(); t != nil {
		for _, id := range t.Keys() {
			perTenant[id.Tenant]++
			role := "tenant"
			if id.Admin {
				role = "admin"
			}
			g := byKey[id.KeyID]
			keys = append(keys, overviewKey{ID: id.KeyID, Name: id.KeyName, Tenant: id.Label(), Role: role, Origin: id.Origin,
				Requests: g.Requests, CostNano: g.CostNano})
		}
	}
	keysTotal := len(keys)
	if keysTotal > MaxOverviewKeys {
		// Stable: equal cost keeps the key table's order.
		slices.SortStableFunc(keys, func(a, b overviewKey) int { return cmp.Compare(b.CostNano, a.CostNano) })
		keys = keys[:MaxOverviewKeys]
	}
	if t := s.Admission.Keys(); t != nil {
		byID := make(map[string]int, len(keys))
		for i, k := range keys {
			byID[k.ID] = i
		}
		for _, id := range t.Keys() {
			i, ok := byID[id.KeyID]
			if !ok {
				continue
			}
			// The store is down: the key's own part is left out, as a tenant is.
			if kv, err := s.Admission.KeyUsage(ctx, id); err == nil && kv != nil {
				keys[i].Limits, keys[i].Spend = kv.Limits, kv.Spend
			}
		}
	}
	all := s.Admission.Tenants()
	tenants := []overviewTenant{}
	for _, id := range topTenants(all, byTenant) {
		u, err := s.Admission.Usage(ctx, id, admit.UsageOptions{})
		if err != nil {
			continue // the store is down: the tenant is left out, as on /dashboard
		}
		g := byTenant[id.Label()]
		tenants = append(tenants, overviewTenant{Tenant: id.Label(), Keys: perTenant[id.Tenant], Limits: u.Limits,
			RequestsToday: u.RequestsToday, Spend: u.Spend, Requests24h: g.Requests, CostNano24h: g.CostNano})
	}
	slices.SortFunc(tenants, func(a, b overviewTenant) int {
		if c := cmp.Compare(b.CostNano24h, a.CostNano24h); c != 0 {
			return c
		}
		return cmp.Compare(a.Tenant, b.Tenant)
	})
	points := make([]map[string]any, 0, len(series))
	for _, g := range series {
		t, err := time.Parse("2006-01-02T15", g.Keys["hour"])
		if err != nil {
			continue
		}
		points = append(points, map[string]any{"t": t.UnixMilli(), "model": g.Keys["model"], "requests": g.Requests,
			"cost_nano_usd": g.CostNano, "tokens": g.PromptTokens + g.CompletionTokens})
	}
	front.WriteJSON(w, http.StatusOK, map[string]any{"object": "overview", "timestamp": now.UnixMilli(), "since": since.UnixMilli(),
		"usage_log": logOn, "tenants": tenants, "tenants_total": len(all), "tenants_truncated": len(all) > MaxDashTenants,
		"keys": keys, "keys_total": keysTotal, "keys_truncated": keysTotal > MaxOverviewKeys, "usage_by_model": points,
		"alerts": s.overviewAlerts(ctx), "tag_keys": tagKeys(snap.Config)})
}
