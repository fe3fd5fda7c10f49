package operator

import (
	"fmt"
	"net/http"
	"time"

	"switchboard/internal/admit"
	"switchboard/internal/config"
	"switchboard/internal/front"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
)

// AdminTokenIdentity is who auth.admin_token is on the operator's views
// (/dashboard/data, /v1/health/detail, /v1/usage): an admin with no
// tenant (and no limits) of its own. The server hands it to a view when
// the token is presented; it is no /v1 key, so inference never sees it.
var AdminTokenIdentity = &tenant.Identity{Admin: true, KeyID: AdminTokenActor, Origin: "auth.admin_token",
	BudgetWindowSecs: config.DefaultBudgetWindowSecs}

// Usage serves GET /v1/usage for the authenticated caller, or with
// ?tenant=NAME for that tenant (operators: any; a tenant: its own).
func (s *Plane) Usage(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
	opts := admit.UsageOptions{Advisory: snap.Advisory, Providers: tenant.Operator(id), ByModel: !tenant.Operator(id), Key: true}
	if name := r.URL.Query().Get("tenant"); name != "" {
		t, aerr := s.usageTenant(id, name)
		if aerr != nil {
			front.WriteError(w, front.OpenAI, aerr)
			return
		}
		id, opts.Key = t, false // the tenant's standing, not one of its keys'
	}
	v, err := s.Admission.Usage(r.Context(), id, opts)
	if err != nil {
		// The store's error names its address: the log has it.
		s.Log.WarnContext(r.Context(), "usage unavailable", "error", err.Error())
		front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "usage_unavailable",
			Message: "usage is unavailable right now; request id " + front.RequestID(r.Context()), RetryAfter: time.Second})
		return
	}
	front.WriteJSON(w, http.StatusOK, v)
}

// usageTenant resolves GET /v1/usage?tenant=NAME: an operator (an admin
// key, auth.admin_token, or anyone with auth off) reads any tenant's
// standing; a tenant key only its own.
func (s *Plane) usageTenant(id *tenant.Identity, name string) (*tenant.Identity, *front.Error) {
	if !tenant.Operator(id) && id.Tenant != name {
		return nil, &front.Error{Status: http.StatusForbidden, Type: "permission_error", Code: "admin_required", Param: "tenant",
			Message: "a tenant key reads its own usage only; another tenant's needs an admin key or auth.admin_token"}
	}
	for _, t := range s.Admission.Tenants() {
		if t.Tenant == name {
			return t, nil
		}
	}
	return nil, &front.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "tenant_not_found", Param: "tenant",
		Message: fmt.Sprintf("no tenant named %q", front.Shown(name))}
}
