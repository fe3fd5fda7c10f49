package operator

import (
	"cmp"
	"context"
	"embed"
	"net/http"
	"slices"
	"time"

	"switchboard/internal/front"
	"switchboard/internal/tenant"
	"switchboard/internal/usagelog"
)

// What the views share: the embedded pages, the usage log's queries
// (their bound, their failure, sums by one dimension) and the cut of
// the tenants a view lists.

//go:embed dashboard/index.html dashboard/admin.html
var dashboardFS embed.FS

// servePage writes an embedded page; it loads nothing from elsewhere.
func servePage(w http.ResponseWriter, name string) {
	b, err := dashboardFS.ReadFile(name)
	if err != nil {
		front.WriteError(w, front.OpenAI, &front.Error{Status: 500, Type: "server_error", Message: name + " is missing from the build"})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	_, _ = w.Write(b)
}

// MaxDashTenants bounds the tenants /dashboard and /admin list (one store
// read each, every poll). A variable so that tests can lower it.
var MaxDashTenants = 100

// topTenants picks the tenants a view lists: all of them when they fit,
// else the MaxDashTenants with the highest cost over the last 24 h in the
// usage log (byTenant, keyed by label), ties by name. Without the log
// (byTenant nil) nothing ranks them and the cut is by name. all is sorted
// by name (tenant.Table) and left alone.
func topTenants(all []*tenant.Identity, byTenant map[string]usagelog.Group) []*tenant.Identity {
	if len(all) <= MaxDashTenants {
		return all
	}
	ids := slices.Clone(all)
	if byTenant != nil {
		slices.SortStableFunc(ids, func(a, b *tenant.Identity) int {
			return cmp.Compare(byTenant[b.Label()].CostNano, byTenant[a.Label()].CostNano)
		})
	}
	return ids[:MaxDashTenants]
}

// overviewWindow is the usage chart's span and the keys' spend window.
const overviewWindow = 24 * time.Hour

// groupsBy sums f's rows by one dimension, keyed by its value.
func groupsBy(ctx context.Context, db *usagelog.DB, f usagelog.Filter, dim string) (map[string]usagelog.Group, error) {
	gs, err := db.Summarize(ctx, f, []string{dim})
	if err != nil {
		return nil, err
	}
	out := make(map[string]usagelog.Group, len(gs))
	for _, g := range gs {
		out[g.Keys[dim]] = g
	}
	return out, nil
}

// queryTimeout bounds a summary or a page.
const queryTimeout = 30 * time.Second

// queryFailed answers a query the database could not run.
func (s *Plane) queryFailed(w http.ResponseWriter, r *http.Request, err error) {
	s.Log.WarnContext(r.Context(), "usage log query failed", "error", err.Error())
	front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "usage_unavailable",
		Message: "the usage log cannot be read right now; request id " + front.RequestID(r.Context()), RetryAfter: time.Second})
}
