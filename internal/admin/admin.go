// Package admin is the operator plane's model: gateway keys and tenants
// issued at runtime, their validation, and the audit log of every change.
//
// A Store keeps them: SQLite (the store's file, or an in-memory database
// when the gateway keeps no file) for one process, Redis for a fleet. A
// change is one transaction that checks its preconditions against the
// current records, writes the records, appends its audit row and bumps a
// version, all or nothing; a process killed in the middle leaves either
// the whole change or none of it. Only a key's SHA-256 is stored: the
// secret is returned once, at creation or rotation.
//
// Replicas follow the version: SQLite applies a change at once in its own
// process; with Redis a change is published on a channel, and a poll of
// the version every PollInterval is the backstop, so every replica
// swaps in the new key table within a second.
package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/tenant"
)

// PollInterval is how often a replica compares the store's version with
// the one it serves (the backstop of the change notification).
const PollInterval = 500 * time.Millisecond

// Key is an issued gateway key as stored. The secret is never stored.
type Key struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Digest string `json:"digest"` // hex SHA-256 of the secret
	Tenant string `json:"tenant"`
	Role   string `json:"role"`
	Tier   int    `json:"tier"`
	// ExpiresAt: nil = never.
	ExpiresAt *time.Time `json:"expires_at"`
	// Models: nil = every model.
	Models []string `json:"models"`
	// RPM and TPM are the key's own rate limits, enforced in addition to
	// its tenant's: nil = none at the key level, 0 denies.
	RPM *int64 `json:"rpm"`
	TPM *int64 `json:"tpm"`
	// DailyRequests and BudgetUSD (per BudgetWindowSecs, default 86400)
	// are the key's own, counted in its own ledger in addition to its
	// tenant's: nil = none at the key level.
	DailyRequests    *int64   `json:"daily_requests"`
	BudgetUSD        *float64 `json:"budget_usd"`
	BudgetWindowSecs *int64   `json:"budget_window_secs"`
	// PrevDigest works until PrevUntil after a rotation with a grace.
	PrevDigest string     `json:"prev_digest,omitempty"`
	PrevUntil  *time.Time `json:"prev_until,omitempty"`
	Created    time.Time  `json:"created"`
	Updated    time.Time  `json:"updated"`
	// Revoked: the key no longer works; the record stays for the audit.
	Revoked *time.Time `json:"revoked"`
}

// Tenant is an issued tenant: the limits its keys share. An omitted limit
// is unlimited, an explicit 0 denies (as in the config).
type Tenant struct {
	Name                string    `json:"name"`
	RPM                 *int64    `json:"rpm"`
	TPM                 *int64    `json:"tpm"`
	DailyRequests       *int64    `json:"daily_requests"`
	BudgetUSD           *float64  `json:"budget_usd"`
	BudgetWindowSecs    *int64    `json:"budget_window_secs"`
	BudgetAllowUnpriced bool      `json:"budget_allow_unpriced"`
	Created             time.Time `json:"created"`
	Updated             time.Time `json:"updated"`
}

// Spec is the tenant's limits in the config's shape, for its validation
// and for the key table.
func (t *Tenant) Spec() *config.KeySpec {
	return &config.KeySpec{Tenant: t.Name, RPM: t.RPM, TPM: t.TPM, DailyRequests: t.DailyRequests,
		BudgetUSD: t.BudgetUSD, BudgetWindowSecs: t.BudgetWindowSecs, BudgetAllowUnpriced: t.BudgetAllowUnpriced}
}

// AuditEntry is one admin change. It never holds a secret or a digest.
type AuditEntry struct {
	Seq    int64     `json:"seq"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	// Fields are the fields the change set, with their new values.
	Fields map[string]any `json:"fields,omitempty"`
}

// Actions in the audit log.
const (
	ActionKeyCreate    = "key.create"
	ActionKeyUpdate    = "key.update"
	ActionKeyRevoke    = "key.revoke"
	ActionKeyRotate    = "key.rotate"
	ActionTenantCreate = "tenant.create"
	ActionTenantUpdate = "tenant.update"
	ActionTenantDelete = "tenant.delete"
)

// State is every issued record at one version.
type State struct {
	Version int64
	Keys    map[string]*Key    // by id
	Tenants map[string]*Tenant // by name
}

func newState() *State { return &State{Keys: map[string]*Key{}, Tenants: map[string]*Tenant{}} }

// Change is what one transaction writes: records put or deleted, and its
// audit row (Seq and At are assigned by the store's clock of the change).
type Change struct {
	PutKeys    []*Key
	PutTenants []*Tenant
	DelTenants []string
	Audit      AuditEntry
}

// ErrConflict is returned by a Store when a concurrent change won; the
// caller runs its change again on the new state.
var ErrConflict = errors.New("admin: concurrent change")

// AuditQuery selects audit rows: after Seq After (0 = from the start),
// at most Limit, oldest first.
type AuditQuery struct {
	After int64
	Limit int
}

// Store keeps the issued records.
type Store interface {
	// Load reads every record and the version.
	Load(ctx context.Context) (*State, error)
	// Version reads the version only (cheap; polled).
	Version(ctx context.Context) (int64, error)
	// Update runs fn on the current state inside one transaction and
	// writes its change with the audit row, bumping the version; fn's
	// error aborts without writing. It returns the new version.
	Update(ctx context.Context, fn func(*State) (*Change, error)) (int64, error)
	// Audit lists audit rows.
	Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
	// Changes delivers a signal when another process may have changed
	// the records (nil channel: only this process writes).
	Changes(ctx context.Context) <-chan struct{}
}

// Issued compiles the live records for the key table at now: revoked
// keys are left out, a rotation's old secret only within its grace.
func (s *State) Issued(now time.Time) *tenant.Issued {
	is := &tenant.Issued{Tenants: make(map[string]*config.KeySpec, len(s.Tenants)), Recorded: len(s.Keys) > 0}
	for name, t := range s.Tenants {
		is.Tenants[name] = t.Spec()
	}
	// Sorted by id for a stable table; pointers sort, not the large
	// IssuedKey values (every change compiles every key: keep it cheap).
	live := make([]*Key, 0, len(s.Keys))
	for _, k := range s.Keys {
		if k.Revoked == nil {
			live = append(live, k)
		}
	}
	slices.SortFunc(live, func(a, b *Key) int { return strings.Compare(a.ID, b.ID) })
	is.Keys = make([]tenant.IssuedKey, 0, len(live))
	for _, k := range live {
		d, ok := digestOf(k.Digest)
		if !ok {
			continue
		}
		ik := tenant.IssuedKey{Digest: d, ID: k.ID, Name: k.Name, Tenant: k.Tenant, Role: k.Role, Tier: k.Tier, Models: k.Models,
			RPM: k.RPM, TPM: k.TPM, DailyRequests: k.DailyRequests, BudgetUSD: k.BudgetUSD, BudgetWindowSecs: k.BudgetWindowSecs}
		if k.ExpiresAt != nil {
			ik.ExpiresAt = *k.ExpiresAt
		}
		if k.PrevUntil != nil && now.Before(*k.PrevUntil) {
			if p, ok := digestOf(k.PrevDigest); ok {
				ik.Previous, ik.PreviousUntil = p, *k.PrevUntil
			}
		}
		is.Keys = append(is.Keys, ik)
	}
	return is
}

func digestOf(h string) ([32]byte, bool) {
	var d [32]byte
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 32 {
		return d, false
	}
	copy(d[:], b)
	return d, true
}

func digestHex(secret string) string {
	d := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(d[:])
}
