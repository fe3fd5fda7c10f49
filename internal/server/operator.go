package server

import (
	"fmt"
	"net/http"

	"switchboard/internal/config"
	"switchboard/internal/tenant"
)

// adminTokenIdentity is who auth.admin_token is on the operator's views:
// an admin with no tenant (and no limits) of its own.
var adminTokenIdentity = &tenant.Identity{Admin: true, KeyID: AdminTokenActor, Origin: "auth.admin_token",
	BudgetWindowSecs: config.DefaultBudgetWindowSecs}

// viewEntry is entry for the operator's views (/dashboard/data,
// /v1/health/detail, /v1/usage): auth.admin_token opens them as an admin
// key does, so the /admin page's link to the dashboard works with the
// token it was opened with. It stays no /v1 key: inference refuses it.
func (s *Server) viewEntry(w http.ResponseWriter, r *http.Request) (*Snapshot, *tenant.Identity) {
	snap := s.snap.Load()
	if snap != nil && snap.adminHash != nil && !s.draining.Load() && jobOf(r.Context()) == nil {
		if k := presentedKey(r); k != "" && checkToken(k, snap.adminHash) {
			return snap, adminTokenIdentity
		}
	}
	return s.entry(w, r)
}

// usageTenant resolves GET /v1/usage?tenant=NAME: an operator (an admin
// key, auth.admin_token, or anyone with auth off) reads any tenant's
// standing; a tenant key only its own.
func (s *Server) usageTenant(id *tenant.Identity, name string) (*tenant.Identity, *apiError) {
	if !tenant.Operator(id) && id.Tenant != name {
		return nil, &apiError{Status: http.StatusForbidden, Type: "permission_error", Code: "admin_required", Param: "tenant",
			Message: "a tenant key reads its own usage only; another tenant's needs an admin key or auth.admin_token"}
	}
	for _, t := range s.Admission.Tenants() {
		if t.Tenant == name {
			return t, nil
		}
	}
	return nil, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "tenant_not_found", Param: "tenant",
		Message: fmt.Sprintf("no tenant named %q", shown(name))}
}
