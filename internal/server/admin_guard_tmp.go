package server

import (
	"net/http"
	"time"

	"switchboard/internal/tenant"
)

// usageAdmin guards an admin handler until the admin API's own guard (s.admin) lands: a key with role admin (or auth.token)
// passes, a tenant key gets 403, no or an unknown key 401; with auth off
// the admin plane is refused (403): every tenant's spend must not be open
// to whoever reaches the port.
func (s *Server) usageAdmin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		snap := s.snap.Load()
		if snap == nil || s.draining.Load() {
			writeError(w, OpenAI, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error",
				Code: "unavailable", Message: "the gateway is starting or shutting down", RetryAfter: time.Second})
			return
		}
		id, ok := s.Admission.Authenticate(presentedKey(r))
		switch {
		case ok && id == nil:
			writeError(w, OpenAI, &apiError{Status: http.StatusForbidden, Type: "permission_error", Code: "admin_disabled",
				Message: "the admin API needs auth: configure gateway keys with an admin key (role: admin)"})
		case !ok:
			writeError(w, OpenAI, &apiError{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_api_key",
				Message: "the admin API needs an admin key (role: admin) as a Bearer token"})
		case !tenant.Operator(id):
			writeError(w, OpenAI, &apiError{Status: http.StatusForbidden, Type: "permission_error", Code: "admin_required",
				Message: "this key is a tenant key; the admin API needs an admin key (role: admin)"})
		default:
			h(w, r)
		}
	}
}
