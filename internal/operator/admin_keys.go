package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"switchboard/internal/admin"
	"switchboard/internal/config"
	"switchboard/internal/front"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
)

// maxAdminBody bounds an admin request body.
const maxAdminBody = 64 << 10

// adminEnv is what admin changes are checked against in snap's config.
func adminEnv(snap *snapshot.Snapshot) *admin.Env {
	ct := map[string]bool{}
	for _, keys := range []map[string]*config.KeySpec{snap.Config.Auth.Keys, snap.Config.Auth.FileKeys} {
		for _, k := range keys {
			ct[k.Tenant] = true
		}
	}
	return &admin.Env{ConfigTenants: ct, Model: func(name string) (string, bool) {
		if rt := snap.Routes.Lookup(name); rt != nil {
			return rt.Model.Name, true
		}
		return "", false
	}}
}

// adminFailed writes an admin call's error: the admin package's refusals
// as they are, anything else (the store failing) as 503.
func (s *Plane) adminFailed(w http.ResponseWriter, r *http.Request, err error) {
	if e, ok := admin.AsError(err); ok {
		typ := "invalid_request_error"
		if e.Status == http.StatusNotFound {
			typ = "not_found_error"
		}
		front.WriteError(w, front.OpenAI, &front.Error{Status: e.Status, Type: typ, Code: e.Code, Param: e.Param, Message: e.Message})
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	s.Log.ErrorContext(r.Context(), "admin: store failed", "error", err.Error())
	front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "store_unavailable",
		Message: "the admin store did not answer; nothing was changed unless a retry shows it", RetryAfter: time.Second})
}

// adminBody reads an admin request body (bounded in size and time).
func (s *Plane) adminBody(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot) ([]byte, bool) {
	b, aerr := front.ReadBody(r, w, maxAdminBody, snap.Config.Limits.BodyTimeout.D())
	if aerr != nil {
		if aerr.Code == "request_too_large" { // a fixed bound, not limits.max_request_body
			aerr.Message = fmt.Sprintf("an admin request body is limited to %d bytes", maxAdminBody)
		}
		front.WriteError(w, front.OpenAI, aerr)
		return nil, false
	}
	return b, true
}

func readOnly(what, id, origin string) *front.Error {
	return &front.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "read_only",
		Message: fmt.Sprintf("%s %s comes from %s in the config; change it there (the admin API changes only what it issued)", what, id, origin)}
}

// keyView is a key as the admin API shows it; never the secret, except
// once in the answer that created or rotated it.
type keyView struct {
	ID        string     `json:"id"`
	Object    string     `json:"object"`
	Name      string     `json:"name"`
	Tenant    string     `json:"tenant"`
	Role      string     `json:"role"`
	Tier      int        `json:"tier"`
	ExpiresAt *time.Time `json:"expires_at"`
	Models    []string   `json:"models"`
	RPM       *int64     `json:"rpm"`
	TPM       *int64     `json:"tpm"`
	// The key's own daily count and budget (issued keys; null = none).
	DailyRequests    *int64     `json:"daily_requests"`
	BudgetUSD        *float64   `json:"budget_usd"`
	BudgetWindowSecs *int64     `json:"budget_window_secs"`
	Source           string     `json:"source"`
	ReadOnly         bool       `json:"read_only"`
	Created          *time.Time `json:"created,omitempty"`
	Updated          *time.Time `json:"updated,omitempty"`
	Revoked          bool       `json:"revoked"`
	RevokedAt        *time.Time `json:"revoked_at,omitempty"`
	// PreviousSecretUntil: after a rotation with a grace, the old secret
	// works until then.
	PreviousSecretUntil *time.Time `json:"previous_secret_until,omitempty"`
	Secret              string     `json:"secret,omitempty"`
}

func configKeyView(id *tenant.Identity) keyView {
	role := config.RoleTenant
	if id.Admin {
		role = config.RoleAdmin
	}
	return keyView{ID: id.KeyID, Object: "key", Tenant: id.Tenant, Role: role, Tier: id.Tier, Source: id.Origin, ReadOnly: true}
}

func issuedKeyView(k *admin.Key) keyView {
	v := keyView{ID: k.ID, Object: "key", Name: k.Name, Tenant: k.Tenant, Role: k.Role, Tier: k.Tier, ExpiresAt: k.ExpiresAt,
		Models: k.Models, RPM: k.RPM, TPM: k.TPM, DailyRequests: k.DailyRequests,
		BudgetUSD: k.BudgetUSD, BudgetWindowSecs: k.BudgetWindowSecs, Source: tenant.OriginAdmin, Created: &k.Created, Updated: &k.Updated,
		Revoked: k.Revoked != nil, RevokedAt: k.Revoked, PreviousSecretUntil: k.PrevUntil}
	return v
}

// configKey finds a key of the config by id.
func (s *Plane) configKey(id string) *tenant.Identity {
	if t := s.Admission.Keys(); t != nil {
		for _, k := range t.Keys() {
			if k.KeyID == id && k.Origin != tenant.OriginAdmin {
				return k
			}
		}
	}
	return nil
}

// Keys lists every key (GET: config keys, then issued ones
// oldest first, in pages; ?revoked=false leaves revoked ones out) or
// issues one (POST).
func (s *Plane) Keys(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, caller *tenant.Identity) {
	if r.Method == http.MethodPost {
		body, ok := s.adminBody(w, r, snap)
		if !ok {
			return
		}
		is, err := s.Admin.CreateKey(r.Context(), actorOf(caller), adminEnv(snap), body)
		s.writeIssue(w, r, http.StatusCreated, is, err)
		return
	}
	q, ok := adminParams(w, r, "limit", "after", "revoked")
	if !ok {
		return
	}
	hideRevoked := false
	switch v, given := q["revoked"]; {
	case !given || v[0] == "true":
	case v[0] == "false":
		hideRevoked = true
	default:
		front.WriteError(w, front.OpenAI, &front.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "revoked",
			Message: fmt.Sprintf("revoked: want true or false, got %q", v[0])})
		return
	}
	limit := keysDefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > keysMaxLimit {
			front.WriteError(w, front.OpenAI, &front.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "limit",
				Message: fmt.Sprintf("limit: want an integer between 1 and %d", keysMaxLimit)})
			return
		}
		limit = n
	}
	st, err := s.Admin.Load(r.Context())
	if err != nil {
		s.adminFailed(w, r, err)
		return
	}
	// One list: config keys by id, then issued keys oldest first (the id
	// breaks ties), so that limit counts both and after may name either.
	type listed struct {
		id      string
		config  *tenant.Identity
		issued  *admin.Key
		revoked bool
	}
	var all []listed
	if t := s.Admission.Keys(); t != nil {
		for _, id := range t.Keys() {
			if id.Origin != tenant.OriginAdmin {
				all = append(all, listed{id: id.KeyID, config: id})
			}
		}
		slices.SortFunc(all, func(a, b listed) int { return strings.Compare(a.id, b.id) })
	}
	issued := make([]*admin.Key, 0, len(st.Keys))
	for _, k := range st.Keys {
		issued = append(issued, k)
	}
	slices.SortFunc(issued, func(a, b *admin.Key) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, k := range issued {
		all = append(all, listed{id: k.ID, issued: k, revoked: k.Revoked != nil})
	}
	// The cursor is looked up before revoked keys are left out: a key
	// revoked between two pages still marks where the next one starts.
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(all, func(l listed) bool { return l.id == after })
		if i < 0 {
			front.WriteError(w, front.OpenAI, &front.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "after",
				Message: fmt.Sprintf("after: no key %q (use next_after of the previous page)", front.Shown(after))})
			return
		}
		all = all[i+1:]
	}
	if hideRevoked {
		all = slices.DeleteFunc(all, func(l listed) bool { return l.revoked })
	}
	more := len(all) > limit
	if more {
		all = all[:limit]
	}
	out := make([]keyView, 0, len(all))
	for _, l := range all {
		if l.config != nil {
			out = append(out, configKeyView(l.config))
		} else {
			out = append(out, issuedKeyView(l.issued))
		}
	}
	body := map[string]any{"object": "list", "data": out, "has_more": more}
	if more {
		body["next_after"] = all[len(all)-1].id
	}
	front.WriteJSON(w, http.StatusOK, body)
}

// Pages of issued keys: ?limit=1..10000 (default 1000)&after=<key id>.
const (
	keysDefaultLimit = 1000
	keysMaxLimit     = 10000
)

// longID answers 404 for a path id longer than any key id or tenant name
// can be, echoing it bounded (shown) rather than whole.
func longID(w http.ResponseWriter, what, id string) bool {
	if len(id) <= front.MaxShown {
		return false
	}
	front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusNotFound, Type: "not_found_error", Code: "not_found",
		Message: fmt.Sprintf("no %s %q", what, front.Shown(id))})
	return true
}

// Key shows (GET), updates (PATCH) or revokes (DELETE) a key.
func (s *Plane) Key(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, caller *tenant.Identity) {
	id := r.PathValue("id")
	if longID(w, "key", id) {
		return
	}
	if ck := s.configKey(id); ck != nil {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			front.WriteJSON(w, http.StatusOK, configKeyView(ck))
			return
		}
		front.WriteError(w, front.OpenAI, readOnly("key", id, ck.Origin))
		return
	}
	ctx, actor := r.Context(), actorOf(caller)
	var k *admin.Key
	var err error
	switch r.Method {
	case http.MethodPatch:
		body, ok := s.adminBody(w, r, snap)
		if !ok {
			return
		}
		k, err = s.Admin.UpdateKey(ctx, actor, adminEnv(snap), id, body)
	case http.MethodDelete:
		k, err = s.Admin.RevokeKey(ctx, actor, id)
	default:
		var st *admin.State
		if st, err = s.Admin.Load(ctx); err == nil {
			if k = st.Keys[id]; k == nil {
				err = &admin.Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no key %q", front.Shown(id))}
			}
		}
	}
	if err != nil {
		s.adminFailed(w, r, err)
		return
	}
	front.WriteJSON(w, http.StatusOK, issuedKeyView(k))
}

// KeyAction runs POST /admin/v1/keys/{id}/revoke or /rotate.
func (s *Plane) KeyAction(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, caller *tenant.Identity) {
	id, action := r.PathValue("id"), r.PathValue("action")
	if longID(w, "key", id) {
		return
	}
	if action != "revoke" && action != "rotate" {
		front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: fmt.Sprintf("no action %q on a key; use revoke or rotate", action)})
		return
	}
	if ck := s.configKey(id); ck != nil {
		front.WriteError(w, front.OpenAI, readOnly("key", id, ck.Origin))
		return
	}
	body, ok := s.adminBody(w, r, snap)
	if !ok {
		return
	}
	ctx, actor := r.Context(), actorOf(caller)
	if action == "revoke" {
		if len(strings.TrimSpace(string(body))) > 0 && strings.TrimSpace(string(body)) != "{}" {
			front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unknown_field",
				Message: "revoke takes no fields"})
			return
		}
		k, err := s.Admin.RevokeKey(ctx, actor, id)
		if err != nil {
			s.adminFailed(w, r, err)
			return
		}
		front.WriteJSON(w, http.StatusOK, issuedKeyView(k))
		return
	}
	is, err := s.Admin.RotateKey(ctx, actor, id, body)
	s.writeIssue(w, r, http.StatusOK, is, err)
}

// writeIssue answers a creation or rotation: the key with its secret,
// which no cache may keep.
func (s *Plane) writeIssue(w http.ResponseWriter, r *http.Request, status int, is *admin.Issue, err error) {
	if err != nil {
		s.adminFailed(w, r, err)
		return
	}
	v := issuedKeyView(is.Key)
	v.Secret = is.Secret
	w.Header().Set("Cache-Control", "no-store")
	front.WriteJSON(w, status, v)
}

// tenantView is a tenant as the admin API shows it.
type tenantView struct {
	Name                string     `json:"name"`
	Object              string     `json:"object"`
	RPM                 *int64     `json:"rpm"`
	TPM                 *int64     `json:"tpm"`
	DailyRequests       *int64     `json:"daily_requests"`
	BudgetUSD           *float64   `json:"budget_usd"`
	BudgetWindowSecs    int64      `json:"budget_window_secs"`
	BudgetAllowUnpriced bool       `json:"budget_allow_unpriced"`
	Source              string     `json:"source"`
	ReadOnly            bool       `json:"read_only"`
	Created             *time.Time `json:"created,omitempty"`
	Updated             *time.Time `json:"updated,omitempty"`
}

func issuedTenantView(t *admin.Tenant) tenantView {
	return tenantView{Name: t.Name, Object: "tenant", RPM: t.RPM, TPM: t.TPM, DailyRequests: t.DailyRequests, BudgetUSD: t.BudgetUSD,
		BudgetWindowSecs: t.Spec().WindowSecs(), BudgetAllowUnpriced: t.BudgetAllowUnpriced, Source: tenant.OriginAdmin,
		Created: &t.Created, Updated: &t.Updated}
}

// configTenants are the config's tenants, by name, from its keys.
func configTenants(snap *snapshot.Snapshot) map[string]tenantView {
	out := map[string]tenantView{}
	for origin, keys := range map[string]map[string]*config.KeySpec{tenant.OriginConfig: snap.Config.Auth.Keys,
		tenant.OriginKeysFile: snap.Config.Auth.FileKeys} {
		for _, k := range keys {
			if _, ok := out[k.Tenant]; ok {
				continue
			}
			v := tenantView{Name: k.Tenant, Object: "tenant", RPM: k.RPM, TPM: k.TPM, DailyRequests: k.DailyRequests, BudgetUSD: k.BudgetUSD,
				BudgetWindowSecs: k.WindowSecs(), BudgetAllowUnpriced: k.BudgetAllowUnpriced, Source: origin, ReadOnly: true}
			out[k.Tenant] = v
		}
	}
	return out
}

// Tenants lists tenants (GET) or creates one (POST).
func (s *Plane) Tenants(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, caller *tenant.Identity) {
	if r.Method == http.MethodPost {
		body, ok := s.adminBody(w, r, snap)
		if !ok {
			return
		}
		t, err := s.Admin.CreateTenant(r.Context(), actorOf(caller), adminEnv(snap), body)
		if err != nil {
			s.adminFailed(w, r, err)
			return
		}
		front.WriteJSON(w, http.StatusCreated, issuedTenantView(t))
		return
	}
	if _, ok := adminParams(w, r); !ok {
		return
	}
	st, err := s.Admin.Load(r.Context())
	if err != nil {
		s.adminFailed(w, r, err)
		return
	}
	out := []tenantView{}
	for _, v := range configTenants(snap) {
		out = append(out, v)
	}
	for _, t := range st.Tenants {
		out = append(out, issuedTenantView(t))
	}
	slices.SortFunc(out, func(a, b tenantView) int { return strings.Compare(a.Name, b.Name) })
	front.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

// Tenant shows (GET), updates (PATCH) or deletes (DELETE) one.
func (s *Plane) Tenant(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, caller *tenant.Identity) {
	name := r.PathValue("name")
	if longID(w, "tenant", name) {
		return
	}
	ctx, actor := r.Context(), actorOf(caller)
	st, err := s.Admin.Load(ctx)
	if err != nil {
		s.adminFailed(w, r, err)
		return
	}
	if st.Tenants[name] == nil {
		if v, ok := configTenants(snap)[name]; ok {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				front.WriteJSON(w, http.StatusOK, v)
				return
			}
			front.WriteError(w, front.OpenAI, readOnly("tenant", strconv.Quote(name), v.Source))
			return
		}
	}
	switch r.Method {
	case http.MethodPatch:
		body, ok := s.adminBody(w, r, snap)
		if !ok {
			return
		}
		t, err := s.Admin.UpdateTenant(ctx, actor, name, body)
		if err != nil {
			s.adminFailed(w, r, err)
			return
		}
		front.WriteJSON(w, http.StatusOK, issuedTenantView(t))
	case http.MethodDelete:
		if err := s.Admin.DeleteTenant(ctx, actor, name); err != nil {
			s.adminFailed(w, r, err)
			return
		}
		front.WriteJSON(w, http.StatusOK, map[string]any{"name": name, "object": "tenant", "deleted": true})
	default:
		t := st.Tenants[name]
		if t == nil {
			s.adminFailed(w, r, &admin.Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no tenant %q", front.Shown(name))})
			return
		}
		front.WriteJSON(w, http.StatusOK, issuedTenantView(t))
	}
}

// Audit pages: ?after=<seq>&limit=<1..1000, default 100>.
const (
	auditDefaultLimit = 100
	auditMaxLimit     = 1000
)

// Audit lists audit rows oldest first; has_more and next_after
// page on.
func (s *Plane) Audit(w http.ResponseWriter, r *http.Request, _ *snapshot.Snapshot, _ *tenant.Identity) {
	params, ok := adminParams(w, r, "after", "limit")
	if !ok {
		return
	}
	q := admin.AuditQuery{Limit: auditDefaultLimit}
	for param, dst := range map[string]*int64{"after": &q.After} {
		if v := params.Get(param); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				front.WriteError(w, front.OpenAI, &front.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: param,
					Message: param + ": want a non-negative integer"})
				return
			}
			*dst = n
		}
	}
	if v := params.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > auditMaxLimit {
			front.WriteError(w, front.OpenAI, &front.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "limit",
				Message: fmt.Sprintf("limit: want an integer between 1 and %d", auditMaxLimit)})
			return
		}
		q.Limit = n
	}
	want := q.Limit
	q.Limit++ // one more tells whether there is a next page
	rows, err := s.Admin.St.Audit(r.Context(), q)
	if err != nil {
		s.adminFailed(w, r, err)
		return
	}
	more := len(rows) > want
	if more {
		rows = rows[:want]
	}
	out := map[string]any{"object": "list", "data": rows, "has_more": more}
	if len(rows) > 0 {
		out["next_after"] = rows[len(rows)-1].Seq
	}
	front.WriteJSON(w, http.StatusOK, out)
}
