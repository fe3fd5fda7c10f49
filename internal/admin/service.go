package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/tenant"
)

// Env is what a change is checked against besides the issued records:
// the running config's tenants and models.
type Env struct {
	// ConfigTenants are the tenants of the config's keys (read-only here).
	ConfigTenants map[string]bool
	// Model resolves a model name (or alias) to the configured model's
	// name; false when unknown.
	Model func(name string) (string, bool)
}

// Service runs admin changes and keeps the key table in step with the
// store: Apply receives every new state (see Run).
type Service struct {
	St    Store
	Clock clock.Clock
	Log   *slog.Logger
	// Apply receives the issued records whenever their version changes.
	Apply func(*tenant.Issued)

	mu     sync.Mutex // serialises refreshes
	served atomic.Int64
	// recorded: this process has seen issued key records. It stays set
	// when they vanish (a Redis restarted without persistence, a flush),
	// so that losing the records never turns auth off for /v1: issuing
	// the first key turned it on, and only an operator turns it off.
	recorded bool
	lost     bool // logged that the records vanished
}

// Refresh loads the records and applies them when their version is not
// the one served (force: apply anyway).
func (s *Service) Refresh(ctx context.Context, force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !force {
		v, err := s.St.Version(ctx)
		if err != nil {
			return err
		}
		if v == s.served.Load() {
			return nil
		}
	}
	st, err := s.St.Load(ctx)
	if err != nil {
		return err
	}
	is := st.Issued(s.Clock.Now())
	switch {
	case is.Recorded:
		s.recorded, s.lost = true, false
	case s.recorded:
		is.Recorded = true
		if !s.lost {
			s.lost = true
			s.Log.Error("admin: the store holds no issued keys any more (a Redis restarted without persistence or flushed?); /v1 still requires a key",
				"version", st.Version)
		}
	}
	if s.Apply != nil {
		s.Apply(is)
	}
	s.served.Store(st.Version)
	return nil
}

// Run follows the store until ctx ends: on every change notification,
// and every PollInterval as the backstop, it compares versions and
// applies a new state. Errors are logged once per outage.
func (s *Service) Run(ctx context.Context) {
	changes := s.St.Changes(ctx)
	failing := false
	for {
		tick, stop := s.Clock.After(PollInterval)
		select {
		case <-ctx.Done():
			stop()
			return
		case _, ok := <-changes:
			stop()
			if !ok {
				changes = nil // the subscription ended; the poll remains
			}
		case <-tick:
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.Refresh(cctx, false)
		cancel()
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			failing = true
			s.Log.Warn("admin: cannot read issued keys; serving the last ones read", "error", err.Error())
		case err == nil && failing:
			failing = false
			s.Log.Info("admin: reading issued keys again")
		}
	}
}

// update runs one change and applies the result in this process at once.
func (s *Service) update(ctx context.Context, fn func(*State) (*Change, error)) error {
	var done *AuditEntry
	v, err := s.St.Update(ctx, func(st *State) (*Change, error) {
		ch, err := fn(st)
		if ch != nil {
			done = &ch.Audit
		}
		return ch, err
	})
	if err != nil {
		return err
	}
	// The operator's log carries each change too (its audit row, never a
	// secret: audit rows hold none).
	s.Log.InfoContext(ctx, "admin change", "seq", v, "actor", done.Actor, "action", done.Action, "target", done.Target)
	if err := s.Refresh(ctx, false); err != nil {
		s.Log.Warn("admin: change stored, but not re-read yet", "error", err.Error())
	}
	return nil
}

// Load reads the records (for listing).
func (s *Service) Load(ctx context.Context) (*State, error) { return s.St.Load(ctx) }

func notFound(what, id string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no %s %q", what, id)}
}

// revokedIssueNew is the refusal of a change to a revoked key.
const revokedIssueNew = "key %s was revoked at %s; issue a new one"

// liveKey is a copy of key id for a change to build on: an unknown key is
// 404 and a revoked one 409 (revokedFormat takes the id and the time).
func liveKey(st *State, id, revokedFormat string) (*Key, error) {
	old := st.Keys[id]
	if old == nil {
		return nil, notFound("key", id)
	}
	if old.Revoked != nil {
		return nil, conflict("revoked", "", revokedFormat, id, old.Revoked.Format(time.RFC3339))
	}
	k := *old
	return &k, nil
}

func conflict(code, param, format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newSecret is a fresh gateway key: 192 random bits.
func newSecret() string { return "sk-sb-" + randomHex(24) }

// liveKeyNamed finds a live (not revoked) key by name.
func liveKeyNamed(st *State, name, except string) *Key {
	for _, k := range st.Keys {
		if k.Revoked == nil && k.Name == name && k.ID != except {
			return k
		}
	}
	return nil
}

// checkKey validates the fields of a key to be (k is the result of the
// create or update) and fills canonical model names. setsExpiry: the call
// sets expires_at, which must then be in the future; a stored expiry
// that has since passed does not block changing the key's other fields.
func (s *Service) checkKey(st *State, env *Env, k *Key, now time.Time, setsExpiry bool) error {
	if e := checkName("name", k.Name); e != nil {
		return e
	}
	if e := checkName("tenant", k.Tenant); e != nil {
		return e
	}
	if e := checkSpec(&config.KeySpec{Tenant: k.Tenant, Role: k.Role, Tier: k.Tier, RPM: k.RPM, TPM: k.TPM,
		DailyRequests: k.DailyRequests, BudgetUSD: k.BudgetUSD, BudgetWindowSecs: k.BudgetWindowSecs}, "tenant"); e != nil {
		return e
	}
	if st.Tenants[k.Tenant] == nil && !env.ConfigTenants[k.Tenant] {
		return invalid("tenant", "no tenant %q: create it first (POST /admin/v1/tenants) or use a tenant of the config", k.Tenant)
	}
	if k.ExpiresAt != nil {
		switch {
		case setsExpiry && !k.ExpiresAt.After(now):
			return invalid("expires_at", "must be in the future, got %s", k.ExpiresAt.UTC().Format(time.RFC3339))
		case k.ExpiresAt.Sub(now) > maxExpiry:
			return invalid("expires_at", "must be within 100 years")
		}
		t := k.ExpiresAt.UTC()
		k.ExpiresAt = &t
	}
	if k.Models != nil {
		if len(k.Models) == 0 || len(k.Models) > maxModels {
			return invalid("models", "list 1 to %d models, or null for every model", maxModels)
		}
		canon := make([]string, 0, len(k.Models))
		for i, m := range k.Models {
			name, ok := env.Model(m)
			if !ok {
				return invalid(fmt.Sprintf("models[%d]", i), "no model %q is configured", m)
			}
			if !slices.Contains(canon, name) {
				canon = append(canon, name)
			}
		}
		sort.Strings(canon)
		k.Models = canon
	}
	if other := liveKeyNamed(st, k.Name, k.ID); other != nil {
		return conflict("duplicate_name", "name", "a key named %q exists already (%s)", k.Name, other.ID)
	}
	return nil
}

// apply sets the fields the body named (a null clears expires_at or
// models; the required fields' nulls were refused before).
func (k *Key) apply(f *KeyFields, p Patch) {
	if f.Name != nil {
		k.Name = *f.Name
	}
	if f.Tenant != nil {
		k.Tenant = *f.Tenant
	}
	if f.Role != nil {
		k.Role = *f.Role
	}
	if f.Tier != nil {
		k.Tier = *f.Tier
	}
	if p.Has("expires_at") {
		k.ExpiresAt = f.ExpiresAt
	}
	if p.Has("models") {
		k.Models = nil
		if f.Models != nil {
			k.Models = *f.Models
		}
	}
	if p.Has("rpm") {
		k.RPM = f.RPM
	}
	if p.Has("tpm") {
		k.TPM = f.TPM
	}
	if p.Has("daily_requests") {
		k.DailyRequests = f.DailyRequests
	}
	if p.Has("budget_usd") {
		k.BudgetUSD = f.BudgetUSD
	}
	if p.Has("budget_window_secs") {
		k.BudgetWindowSecs = f.BudgetWindowSecs
	}
}

// Issue is a created or rotated key with its secret, shown once.
type Issue struct {
	Key    *Key
	Secret string
}

// CreateKey issues a key.
func (s *Service) CreateKey(ctx context.Context, actor string, env *Env, body []byte) (*Issue, error) {
	var f KeyFields
	p, e := Decode(body, &f, keyFieldNames)
	if e != nil {
		return nil, e
	}
	now := s.Clock.Now().UTC()
	secret := newSecret()
	k := &Key{ID: "key-" + randomHex(6), Digest: digestHex(secret), Role: config.RoleTenant, Created: now, Updated: now}
	k.apply(&f, p)
	err := s.update(ctx, func(st *State) (*Change, error) {
		if len(st.Keys) >= MaxKeys {
			return nil, conflict("too_many_keys", "", "%d keys are issued already, the most the admin API keeps", MaxKeys)
		}
		if err := s.checkKey(st, env, k, now, true); err != nil {
			return nil, err
		}
		return &Change{PutKeys: []*Key{k}, Audit: AuditEntry{At: now, Actor: actor, Action: ActionKeyCreate, Target: k.ID,
			Fields: keyAuditFields(k, nil)}}, nil
	})
	if err != nil {
		return nil, err
	}
	return &Issue{Key: k, Secret: secret}, nil
}

// keyAuditFields lists a key's fields (only those in set, when not nil).
func keyAuditFields(k *Key, set func(string) bool) map[string]any {
	all := map[string]any{"name": k.Name, "tenant": k.Tenant, "role": k.Role, "tier": k.Tier, "expires_at": k.ExpiresAt, "models": k.Models,
		"rpm": k.RPM, "tpm": k.TPM, "daily_requests": k.DailyRequests, "budget_usd": k.BudgetUSD, "budget_window_secs": k.BudgetWindowSecs}
	if set == nil {
		return all
	}
	for f := range all {
		if !set(f) {
			delete(all, f)
		}
	}
	return all
}

// UpdateKey changes the fields a PATCH body names.
func (s *Service) UpdateKey(ctx context.Context, actor string, env *Env, id string, body []byte) (*Key, error) {
	var f KeyFields
	p, e := Decode(body, &f, keyFieldNames)
	if e != nil {
		return nil, e
	}
	for _, req := range []struct {
		field string
		null  bool
	}{{"name", f.Name == nil}, {"tenant", f.Tenant == nil}, {"role", f.Role == nil}, {"tier", f.Tier == nil}} {
		if p.Has(req.field) && req.null {
			return nil, invalid(req.field, "must not be null")
		}
	}
	if len(p.present) == 0 {
		return nil, &Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: "nothing to change: name one of " + fmt.Sprint(keyFieldNames)}
	}
	now := s.Clock.Now().UTC()
	var out *Key
	err := s.update(ctx, func(st *State) (*Change, error) {
		k, err := liveKey(st, id, revokedIssueNew)
		if err != nil {
			return nil, err
		}
		k.apply(&f, p)
		k.Updated = now
		if err := s.checkKey(st, env, k, now, p.Has("expires_at")); err != nil {
			return nil, err
		}
		out = k
		return &Change{PutKeys: []*Key{k}, Audit: AuditEntry{At: now, Actor: actor, Action: ActionKeyUpdate, Target: id,
			Fields: keyAuditFields(k, p.Has)}}, nil
	})
	return out, err
}

// RevokeKey ends a key at once, on every replica within a second.
func (s *Service) RevokeKey(ctx context.Context, actor, id string) (*Key, error) {
	now := s.Clock.Now().UTC()
	var out *Key
	err := s.update(ctx, func(st *State) (*Change, error) {
		k, err := liveKey(st, id, "key %s was revoked already at %s")
		if err != nil {
			return nil, err
		}
		k.Revoked, k.Updated, k.PrevDigest, k.PrevUntil = &now, now, "", nil
		out = k
		return &Change{PutKeys: []*Key{k}, Audit: AuditEntry{At: now, Actor: actor, Action: ActionKeyRevoke, Target: id}}, nil
	})
	return out, err
}

// RotateKey gives a key a new secret; the old one works for grace_seconds
// (default 0: not at all).
func (s *Service) RotateKey(ctx context.Context, actor, id string, body []byte) (*Issue, error) {
	var f RotateFields
	if _, e := Decode(body, &f, rotateFieldNames); e != nil {
		return nil, e
	}
	var grace int64
	if f.GraceSeconds != nil {
		grace = *f.GraceSeconds
		if grace < 0 || grace > maxGraceSecs {
			return nil, invalid("grace_seconds", "must be between 0 and %d, got %d", maxGraceSecs, grace)
		}
	}
	now := s.Clock.Now().UTC()
	secret := newSecret()
	var out *Key
	err := s.update(ctx, func(st *State) (*Change, error) {
		k, err := liveKey(st, id, revokedIssueNew)
		if err != nil {
			return nil, err
		}
		// A new secret on an expired key would not work either: refuse
		// rather than hand out a dead secret.
		if k.ExpiresAt != nil && !k.ExpiresAt.After(now) {
			return nil, conflict("expired", "expires_at", "key %s expired at %s; set a new expires_at first (PATCH /admin/v1/keys/%s), then rotate",
				id, k.ExpiresAt.UTC().Format(time.RFC3339), id)
		}
		prev := k.Digest
		k.PrevDigest, k.PrevUntil = "", nil
		if grace > 0 {
			until := now.Add(time.Duration(grace) * time.Second)
			k.PrevDigest, k.PrevUntil = prev, &until
		}
		k.Digest, k.Updated = digestHex(secret), now
		out = k
		return &Change{PutKeys: []*Key{k}, Audit: AuditEntry{At: now, Actor: actor, Action: ActionKeyRotate, Target: id,
			Fields: map[string]any{"grace_seconds": grace}}}, nil
	})
	if err != nil {
		return nil, err
	}
	return &Issue{Key: out, Secret: secret}, nil
}

// tenantFromFields applies f onto t (create: t empty).
func tenantFromFields(t *Tenant, f *TenantFields, p Patch) {
	setI := func(field string, dst **int64, v *int64) {
		if p.Has(field) {
			*dst = v
		}
	}
	setI("rpm", &t.RPM, f.RPM)
	setI("tpm", &t.TPM, f.TPM)
	setI("daily_requests", &t.DailyRequests, f.DailyRequests)
	setI("budget_window_secs", &t.BudgetWindowSecs, f.BudgetWindowSecs)
	if p.Has("budget_usd") {
		t.BudgetUSD = f.BudgetUSD
	}
	if f.BudgetAllowUnpriced != nil {
		t.BudgetAllowUnpriced = *f.BudgetAllowUnpriced
	}
}

func tenantAuditFields(t *Tenant, set func(string) bool) map[string]any {
	all := map[string]any{"rpm": t.RPM, "tpm": t.TPM, "daily_requests": t.DailyRequests, "budget_usd": t.BudgetUSD,
		"budget_window_secs": t.BudgetWindowSecs, "budget_allow_unpriced": t.BudgetAllowUnpriced}
	for f := range all {
		if !set(f) {
			delete(all, f)
		}
	}
	return all
}

// CreateTenant adds a tenant with its limits.
func (s *Service) CreateTenant(ctx context.Context, actor string, env *Env, body []byte) (*Tenant, error) {
	var f TenantFields
	p, e := Decode(body, &f, tenantFieldNames)
	if e != nil {
		return nil, e
	}
	if p.Has("budget_allow_unpriced") && f.BudgetAllowUnpriced == nil {
		return nil, invalid("budget_allow_unpriced", "must not be null")
	}
	now := s.Clock.Now().UTC()
	t := &Tenant{Created: now, Updated: now}
	if f.Name != nil {
		t.Name = *f.Name
	}
	tenantFromFields(t, &f, p)
	if e := checkName("name", t.Name); e != nil {
		return nil, e
	}
	if e := checkSpec(t.Spec(), "name"); e != nil {
		return nil, e
	}
	err := s.update(ctx, func(st *State) (*Change, error) {
		if len(st.Tenants) >= MaxTenants {
			return nil, conflict("too_many_tenants", "", "%d tenants exist already, the most the admin API keeps", MaxTenants)
		}
		if st.Tenants[t.Name] != nil || env.ConfigTenants[t.Name] {
			return nil, conflict("duplicate_name", "name", "a tenant named %q exists already", t.Name)
		}
		return &Change{PutTenants: []*Tenant{t}, Audit: AuditEntry{At: now, Actor: actor, Action: ActionTenantCreate, Target: t.Name,
			Fields: tenantAuditFields(t, func(f string) bool { return p.Has(f) || f == "budget_allow_unpriced" })}}, nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// UpdateTenant changes the limits a PATCH body names; null clears one
// (unlimited). Keys see the new limits within a second.
func (s *Service) UpdateTenant(ctx context.Context, actor, name string, body []byte) (*Tenant, error) {
	var f TenantFields
	p, e := Decode(body, &f, tenantFieldNames)
	if e != nil {
		return nil, e
	}
	switch {
	case p.Has("name"):
		return nil, invalid("name", "a tenant cannot be renamed (its counters and spend are kept by name)")
	case p.Has("budget_allow_unpriced") && f.BudgetAllowUnpriced == nil:
		return nil, invalid("budget_allow_unpriced", "must not be null")
	case len(p.present) == 0:
		return nil, &Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: "nothing to change: name one of " + fmt.Sprint(tenantFieldNames[1:])}
	}
	now := s.Clock.Now().UTC()
	var out *Tenant
	err := s.update(ctx, func(st *State) (*Change, error) {
		old := st.Tenants[name]
		if old == nil {
			return nil, notFound("tenant", name)
		}
		t := *old
		tenantFromFields(&t, &f, p)
		t.Updated = now
		if e := checkSpec(t.Spec(), "name"); e != nil {
			return nil, e
		}
		out = &t
		return &Change{PutTenants: []*Tenant{&t}, Audit: AuditEntry{At: now, Actor: actor, Action: ActionTenantUpdate, Target: name,
			Fields: tenantAuditFields(&t, p.Has)}}, nil
	})
	return out, err
}

// DeleteTenant removes a tenant without live keys.
func (s *Service) DeleteTenant(ctx context.Context, actor, name string) error {
	now := s.Clock.Now().UTC()
	return s.update(ctx, func(st *State) (*Change, error) {
		if st.Tenants[name] == nil {
			return nil, notFound("tenant", name)
		}
		var live []string
		for _, k := range st.Keys {
			if k.Tenant == name && k.Revoked == nil {
				live = append(live, k.ID)
			}
		}
		if len(live) > 0 {
			sort.Strings(live)
			return nil, conflict("tenant_in_use", "", "tenant %q has %d live keys (%s…); revoke them or move them to another tenant first",
				name, len(live), live[0])
		}
		return &Change{DelTenants: []string{name}, Audit: AuditEntry{At: now, Actor: actor, Action: ActionTenantDelete, Target: name}}, nil
	})
}

// AsError returns err as an *Error when it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
