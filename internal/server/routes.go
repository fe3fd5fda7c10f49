package server

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"switchboard/internal/front"
	"switchboard/internal/provider"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
)

// Handler returns the gateway's routes behind its middleware.
func (s *Server) Handler() http.Handler { return s.wrap(s.routes()) }

// jobRoutes are the routes a worker serves jobs through: no access log or
// request metrics (the ingress counted the request).
func (s *Server) jobRoutes() http.Handler {
	s.jobMux.Do(func() { s.jobH = s.routes() })
	return s.jobH
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.get(s.handleHealth))
	mux.HandleFunc("/ready", s.get(s.handleReady))
	mux.HandleFunc("/metrics", s.get(s.handleMetrics))
	inf := s.inf
	mux.HandleFunc("/v1/models", s.get(s.authed(inf.Models)))
	mux.HandleFunc("/v1/models/{name...}", s.get(s.authed(inf.Model)))
	mux.HandleFunc("/v1/chat/completions", post(s.authed(inf.Endpoint(provider.Chat))))
	mux.HandleFunc("/v1/completions", post(s.authed(inf.Endpoint(provider.Completions))))
	mux.HandleFunc("/v1/responses", post(s.authed(inf.Endpoint(provider.Responses))))
	mux.HandleFunc("/v1/embeddings", post(s.authed(inf.Endpoint(provider.Embeddings))))
	mux.HandleFunc("/v1/messages", post(s.authed(inf.Messages)))
	mux.HandleFunc("/v1/health/detail", s.get(s.authed(s.op.HealthDetail)))
	mux.HandleFunc("/v1/usage", s.get(s.authed(s.op.Usage)))
	mux.HandleFunc("/dashboard", s.get(s.op.Dashboard))
	mux.HandleFunc("/dashboard/data", s.get(s.authed(s.op.DashboardData)))
	s.adminRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		front.WriteError(w, front.ProtocolOf(r), &front.Error{Status: http.StatusNotFound, Type: "invalid_request_error",
			Code: "not_found", Message: fmt.Sprintf("no route for %s %s", front.Shown(r.Method), front.Shown(r.URL.Path))})
	})
	return mux
}

// adminRoutes registers the operator plane, every route behind s.admin.
// Routes carry no method in their pattern: a wrong method gets the
// gateway's own 405 (OpenAI error shape), not net/http's plain text.
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
	mux.HandleFunc("/admin", s.get(op.AdminPage))
}

// get allows GET and HEAD only.
func (s *Server) get(h http.HandlerFunc) http.HandlerFunc {
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
