package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"time"

	"switchboard/internal/front"
	"switchboard/internal/operator"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
)

// entry guards /v1 handlers: a loaded config, not draining, authenticated.
// It returns the caller's identity (nil when auth is off); a nil snapshot
// means the answer was written.
func (s *Server) entry(w http.ResponseWriter, r *http.Request) (*snapshot.Snapshot, *tenant.Identity) {
	snap := s.snap.Load()
	if snap == nil || s.draining.Load() {
		front.WriteError(w, front.ProtocolOf(r), &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error",
			Code: "unavailable", Message: "the gateway is starting or shutting down", RetryAfter: time.Second})
		return nil, nil
	}
	id, ok := s.Admission.Authenticate(front.PresentedKey(r))
	if !ok {
		front.WriteError(w, front.ProtocolOf(r), unauthorized(id, "missing or invalid API key: send it as Authorization: Bearer <key>, x-api-key or x-goog-api-key"))
		return nil, nil
	}
	return snap, id
}

// authed runs h for the caller entry admits, with the snapshot it read.
func (s *Server) authed(h front.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		snap, id := s.entry(w, r)
		if snap == nil {
			return
		}
		h(w, r, snap, id)
	}
}

// viewer runs an operator view (/dashboard/data, /v1/health/detail,
// /v1/usage) for the caller entry admits, or for auth.admin_token as an
// admin key (operator.AdminTokenIdentity): the /admin page's link to the
// dashboard works with the token it was opened with. The token stays no
// /v1 key: the inference plane's routes use authed, which refuses it.
func (s *Server) viewer(h front.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if snap := s.snap.Load(); snap != nil && snap.AdminHash != nil && !s.draining.Load() {
			if k := front.PresentedKey(r); k != "" && checkToken(k, snap.AdminHash) {
				h(w, r, snap, operator.AdminTokenIdentity)
				return
			}
		}
		s.authed(h)(w, r)
	}
}

// unauthorized is the 401 for a key Authenticate refused: key_expired
// when it names an expired key (id not nil), else invalid_api_key with msg.
func unauthorized(id *tenant.Identity, msg string) *front.Error {
	if id != nil {
		return &front.Error{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "key_expired",
			Message: fmt.Sprintf("this API key (%s) expired at %s; ask the operator for a new one", id.KeyID, id.ExpiresAt.UTC().Format(time.RFC3339))}
	}
	return &front.Error{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_api_key", Message: msg}
}

// admin guards an /admin/v1 handler: auth.admin_token or a key with role
// admin passes; a tenant key gets 403, no or an unknown key 401. With auth
// off entirely (no keys, no auth.token) and no auth.admin_token the admin
// plane is refused (403): an admin API open to whoever reaches the port
// would let anyone issue keys and read every tenant's spend.
func (s *Server) admin(h front.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		snap := s.snap.Load()
		if snap == nil || s.draining.Load() {
			front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error",
				Code: "unavailable", Message: "the gateway is starting or shutting down", RetryAfter: time.Second})
			return
		}
		k := front.PresentedKey(r)
		if snap.AdminHash != nil && k != "" && checkToken(k, snap.AdminHash) {
			h(w, r, snap, nil) // no key: the operator plane records operator.AdminTokenActor
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
		h(w, r, snap, id)
	}
}

// checkToken compares a presented token with a stored hash in constant time.
func checkToken(presented string, want *[32]byte) bool {
	got := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}
