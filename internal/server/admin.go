package server

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"switchboard/internal/front"
	"time"
)

// adminActorKey carries the admin who makes an /admin/v1 call.
const adminActorKey ctxKey = 100

// AdminTokenActor is the actor recorded for calls made with
// auth.admin_token (it is no key, so it has no key id).
const AdminTokenActor = "admin_token"

// adminActor returns who makes an admin call: the admin key's KeyID, or
// AdminTokenActor ("" outside the admin guard).
func adminActor(ctx context.Context) string {
	a, _ := ctx.Value(adminActorKey).(string)
	return a
}

// adminRoutes registers the operator plane, every route behind s.admin.
// Routes carry no method in their pattern: a wrong method gets the
// gateway's own 405 (OpenAI error shape), not net/http's plain text.
func (s *Server) adminRoutes(mux *http.ServeMux) {
	issued := func(hs map[string]http.HandlerFunc) http.HandlerFunc { return s.admin(s.withAdminStore(methods(hs))) }
	mux.HandleFunc("/admin/v1/keys", issued(map[string]http.HandlerFunc{"GET": s.handleAdminKeys, "POST": s.handleAdminKeys}))
	mux.HandleFunc("/admin/v1/keys/{id}", issued(map[string]http.HandlerFunc{"GET": s.handleAdminKey,
		"PATCH": s.handleAdminKey, "DELETE": s.handleAdminKey}))
	mux.HandleFunc("/admin/v1/keys/{id}/{action}", issued(map[string]http.HandlerFunc{"POST": s.handleAdminKeyAction}))
	mux.HandleFunc("/admin/v1/tenants", issued(map[string]http.HandlerFunc{"GET": s.handleAdminTenants, "POST": s.handleAdminTenants}))
	mux.HandleFunc("/admin/v1/tenants/{name}", issued(map[string]http.HandlerFunc{"GET": s.handleAdminTenant,
		"PATCH": s.handleAdminTenant, "DELETE": s.handleAdminTenant}))
	mux.HandleFunc("/admin/v1/audit", s.admin(s.withAdminStore(s.get(s.handleAdminAudit))))
}

// withAdminStore answers 503 while no admin store is open.
func (s *Server) withAdminStore(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.adminSvc == nil {
			front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "store_unavailable",
				Message: "the admin store is not open; see the gateway's log", RetryAfter: time.Second})
			return
		}
		h(w, r)
	}
}

// admin guards an /admin/v1 handler: auth.admin_token or a key with role
// admin passes; a tenant key gets 403, no or an unknown key 401. With auth
// off entirely (no keys, no auth.token) and no auth.admin_token the admin
// plane is refused (403): an admin API open to whoever reaches the port
// would let anyone issue keys and read every tenant's spend.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		snap := s.snap.Load()
		if snap == nil || s.draining.Load() {
			front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error",
				Code: "unavailable", Message: "the gateway is starting or shutting down", RetryAfter: time.Second})
			return
		}
		k := front.PresentedKey(r)
		if snap.AdminHash != nil && k != "" && checkToken(k, snap.AdminHash) {
			h(w, r.WithContext(context.WithValue(r.Context(), adminActorKey, AdminTokenActor)))
			return
		}
		id, ok := s.Admission.Authenticate(k)
		if ok && id == nil { // no key table: /v1 is open, the admin plane is not
			if snap.AdminHash == nil {
				front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusForbidden, Type: "permission_error", Code: "admin_disabled",
					Message: "the admin API needs auth: set auth.admin_token, or configure gateway keys with an admin key (role: admin)"})
				return
			}
			ok = false
		}
		if !ok {
			front.WriteError(w, front.OpenAI, unauthorized(id, "the admin API needs an admin key (role: admin) or auth.admin_token as a Bearer token"))
			return
		}
		if !id.Admin {
			front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusForbidden, Type: "permission_error", Code: "admin_required",
				Message: "this key is a tenant key; the admin API needs an admin key (role: admin) or auth.admin_token"})
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), adminActorKey, id.KeyID)))
	}
}

// adminRouteLabel bounds the metrics label of an /admin path: the
// collection, with "/{id}" for anything below it.
func adminRouteLabel(p string) string {
	rest, ok := strings.CutPrefix(p, "/admin/v1/")
	if !ok {
		return "other"
	}
	coll, sub, _ := strings.Cut(rest, "/")
	switch coll {
	case "keys", "tenants", "audit", "usage", "requests", "overview":
	default:
		return "/admin/v1/other"
	}
	if sub != "" {
		return "/admin/v1/" + coll + "/{id}"
	}
	return "/admin/v1/" + coll
}

// adminParams reads the query of an admin list route, refusing (400,
// naming it) a parameter the route does not take or one given twice: a
// typo such as ?revoked=no or ?limt=5 must not silently answer as if it
// were absent.
func adminParams(w http.ResponseWriter, r *http.Request, known ...string) (url.Values, bool) {
	q := r.URL.Query()
	for _, name := range slices.Sorted(maps.Keys(q)) { // sorted: the same parameter is named every time
		vs := q[name]
		msg := ""
		switch {
		case !slices.Contains(known, name) && len(known) == 0:
			msg = fmt.Sprintf("%s: unknown parameter; this route takes none", name)
		case !slices.Contains(known, name):
			msg = fmt.Sprintf("%s: unknown parameter; accepted: %s", name, strings.Join(known, ", "))
		case len(vs) > 1:
			msg = name + ": given more than once"
		default:
			continue
		}
		front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_value",
			Param: name, Message: msg})
		return nil, false
	}
	return q, true
}
