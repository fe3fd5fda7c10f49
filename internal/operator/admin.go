package operator

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"switchboard/internal/front"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
)

// AdminTokenActor is the actor recorded for calls made with
// auth.admin_token (it is no key, so it has no key id).
const AdminTokenActor = "admin_token"

// actorOf is who makes an admin call: the admin key's KeyID, or
// AdminTokenActor for auth.admin_token (no identity).
func actorOf(id *tenant.Identity) string {
	if id == nil {
		return AdminTokenActor
	}
	return id.KeyID
}

// WithStore answers 503 while no admin store is open.
func (s *Plane) WithStore(h front.Handler) front.Handler {
	return func(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
		if s.Admin == nil {
			front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "store_unavailable",
				Message: "the admin store is not open; see the gateway's log", RetryAfter: time.Second})
			return
		}
		h(w, r, snap, id)
	}
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
