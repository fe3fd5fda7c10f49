package server

import (
	"net/http"
	"sort"
	"strings"

	"switchboard/internal/front"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
)

// Handler returns the gateway's routes behind its middleware.
func (s *Server) Handler() http.Handler { return s.wrap(s.traced(s.routes())) }

// routes is the route table. Routes carry no method in their pattern: a
// wrong method gets the gateway's own 405 in the client's error shape,
// not net/http's plain text; the method is checked before auth.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	// The front's own.
	mux.HandleFunc("/health", get(s.handleHealth))
	mux.HandleFunc("/ready", get(s.handleReady))
	mux.HandleFunc("/metrics", get(s.handleMetrics))
	// The inference plane: the model endpoints and the model list.
	inf := s.inf
	for _, rt := range inf.Routes() {
		mux.HandleFunc(rt.Path, post(s.authed(rt.Serve)))
	}
	mux.HandleFunc("/v1/models", get(s.authed(inf.Models)))
	mux.HandleFunc("/v1/models/{name...}", get(s.authed(inf.Model)))
	// The operator plane: views every caller may open (each shows a
	// tenant its own part; auth.admin_token opens them too), then the
	// admin API.
	mux.HandleFunc("/v1/health/detail", get(s.viewer(s.op.HealthDetail)))
	mux.HandleFunc("/v1/usage", get(s.viewer(s.op.Usage)))
	mux.HandleFunc("/dashboard", get(s.op.Dashboard))
	mux.HandleFunc("/dashboard/data", get(s.viewer(s.op.DashboardData)))
	s.adminRoutes(mux)
	mux.HandleFunc("/", front.NotFound)
	return mux
}

// adminRoutes registers the operator plane's admin API, every route
// behind the admin guard (s.admin), and the admin page.
func (s *Server) adminRoutes(mux *http.ServeMux) {
	op := s.op
	issued := func(hs map[string]front.Handler) http.HandlerFunc { return s.admin(op.WithStore(methods(hs))) }
	mux.HandleFunc("/admin/v1/keys", issued(map[string]front.Handler{"GET": op.Keys, "POST": op.Keys}))
	mux.HandleFunc("/admin/v1/keys/{id}", issued(map[string]front.Handler{"GET": op.Key,
		"PATCH": op.Key, "DELETE": op.Key}))
	mux.HandleFunc("/admin/v1/keys/{id}/{action}", issued(map[string]front.Handler{"POST": op.KeyAction}))
	mux.HandleFunc("/admin/v1/tenants", issued(map[string]front.Handler{"GET": op.Tenants, "POST": op.Tenants}))
	mux.HandleFunc("/admin/v1/tenants/{name}", issued(map[string]front.Handler{"GET": op.Tenant,
		"PATCH": op.Tenant, "DELETE": op.Tenant}))
	mux.HandleFunc("/admin/v1/audit", s.admin(op.WithStore(getAuthed(op.Audit))))
	// The usage log's queries and the admin page.
	mux.HandleFunc("/admin/v1/usage", s.admin(getAuthed(op.UsageSummary)))
	mux.HandleFunc("/admin/v1/requests", s.admin(getAuthed(op.Requests)))
	mux.HandleFunc("/admin/v1/overview", s.admin(getAuthed(op.Overview)))
	mux.HandleFunc("/admin", get(op.AdminPage))
}

// get allows GET and HEAD only.
func get(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			front.MethodNotAllowed(w, r, "GET, HEAD")
			return
		}
		h(w, r)
	}
}

// post allows POST only.
func post(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			front.MethodNotAllowed(w, r, "POST")
			return
		}
		h(w, r)
	}
}

// getAuthed allows GET and HEAD only.
func getAuthed(h front.Handler) front.Handler {
	return func(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			front.MethodNotAllowed(w, r, "GET, HEAD")
			return
		}
		h(w, r, snap, id)
	}
}

// methods dispatches on the method; others get 405 with Allow.
func methods(hs map[string]front.Handler) front.Handler {
	allow := make([]string, 0, len(hs))
	for m := range hs {
		allow = append(allow, m)
	}
	sort.Strings(allow)
	return func(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
		h := hs[r.Method]
		if h == nil && r.Method == http.MethodHead {
			h = hs[http.MethodGet]
		}
		if h == nil {
			front.MethodNotAllowed(w, r, strings.Join(allow, ", "))
			return
		}
		h(w, r, snap, id)
	}
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	front.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleMetrics serves Prometheus metrics. They name every provider and
// tenant, so whenever any auth is configured they need auth.metrics_token
// or an admin key; without any auth they are open.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	// Keys issued through the admin API turn auth on as config keys do.
	authOn := func(snap *snapshot.Snapshot) bool { return snap.Config.Auth.Enabled() || s.Admission.Keys().Enabled() }
	if snap := s.snap.Load(); snap != nil && (snap.MetricsHash != nil || authOn(snap)) {
		k := front.PresentedKey(r)
		ok := k != "" && snap.MetricsHash != nil && checkToken(k, snap.MetricsHash)
		// auth.admin_token opens everything an admin key does.
		ok = ok || k != "" && snap.AdminHash != nil && checkToken(k, snap.AdminHash)
		if !ok && k != "" && authOn(snap) {
			if id, known := s.Admission.Authenticate(k); known {
				if !tenant.Operator(id) {
					front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusForbidden, Type: "permission_error",
						Code: "admin_required", Message: "metrics need an admin key (role: admin), auth.admin_token or auth.metrics_token"})
					return
				}
				ok = true
			}
		}
		if !ok {
			front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusUnauthorized, Type: "authentication_error",
				Code: "invalid_api_key", Message: "metrics need auth.metrics_token, auth.admin_token or an admin key (role: admin) as a Bearer token"})
			return
		}
	}
	s.Metrics.Handler().ServeHTTP(w, r)
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if !s.Ready() {
		w.Header().Set("Retry-After", "1")
		front.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready"})
		return
	}
	front.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
