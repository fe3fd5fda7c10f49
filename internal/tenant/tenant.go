// Package tenant maps gateway API keys to identities. Keys come from the
// config (auth.keys, the JSON file named by auth.keys_file, and auth.token
// as one anonymous identity); config.Load has validated them already.
//
// A presented key is looked up by its SHA-256 digest in a map: the time
// taken does not depend on how much of a stored key a guess matches (there
// is no loop of string compares), and stored keys may be given as
// "sha256:<hex>" so that no plaintext secret sits in the file.
package tenant

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"switchboard/internal/config"
)

// Identity is who a key belongs to. Limits are nil when unlimited; an
// explicit 0 denies. Counters are per tenant: validation made every key of
// a tenant carry the same limits (the tier may differ).
type Identity struct {
	// Tenant names the identity; "" for the anonymous auth.token identity.
	Tenant string
	Tier   int
	// RPM, TPM and DailyRequests: nil = unlimited.
	RPM, TPM, DailyRequests *int64
	// BudgetNano is the spend cap per window in nano-USD; nil = no budget.
	BudgetNano *int64
	// BudgetWindowSecs is the tumbling budget window (default 86400).
	BudgetWindowSecs int64
	// AllowUnpriced admits unpriceable requests under the budget by holding
	// the window's whole remaining balance.
	AllowUnpriced bool
	// Anonymous marks the auth.token identity.
	Anonymous bool
	// Admin: the key's role is admin (and the auth.token identity, the
	// operator's single shared key, is one).
	Admin bool
	// KeyID names the key used, without revealing it: "cfg-" + the first
	// 12 hex digits of its SHA-256 for keys from the config (auth.keys,
	// auth.keys_file, auth.token), the assigned "key-…" id for keys
	// issued through the admin API. Usage rows and audit entries carry it.
	KeyID string
	// KeyName is the name an admin gave the key ("" for config keys).
	KeyName string
	// Origin says where the key comes from: OriginToken, OriginConfig,
	// OriginKeysFile or OriginAdmin.
	Origin string
	// ExpiresAt, when not zero, is when the key stops working (issued
	// keys only; a rotated key's old secret ends at its grace).
	ExpiresAt time.Time
	// Models, when not nil, are the only models the key may use.
	Models map[string]bool
	// KeyRPM and KeyTPM are an issued key's own rate limits, counted per
	// KeyID in addition to the tenant's; nil = none at the key level.
	KeyRPM, KeyTPM *int64
	// KeyDailyRequests and KeyBudgetNano (per KeyBudgetWindowSecs) are an
	// issued key's own daily count and budget, kept in a ledger of its
	// own (KeyLedger) in addition to the tenant's; nil = none.
	KeyDailyRequests    *int64
	KeyBudgetNano       *int64
	KeyBudgetWindowSecs int64
}

// KeyLedger is the name under which a key's own daily count and spend
// are kept in the admission store, beside the tenants' ledgers. Tenant
// names cannot contain a line feed (the config and the admin API refuse
// one), so it never collides with a tenant's.
func (id *Identity) KeyLedger() string { return "\nkey:" + id.KeyID }

// KeyLedgered reports whether the key has a daily count or budget of its
// own.
func (id *Identity) KeyLedgered() bool {
	return id != nil && id.KeyID != "" && (id.KeyDailyRequests != nil || id.KeyBudgetNano != nil)
}

// Expired reports whether the key no longer works at now.
func (id *Identity) Expired(now time.Time) bool {
	return id != nil && !id.ExpiresAt.IsZero() && !now.Before(id.ExpiresAt)
}

// MayUse reports whether the key may use model (true without a list).
func (id *Identity) MayUse(model string) bool {
	return id == nil || id.Models == nil || id.Models[model]
}

// Origins of a key.
const (
	OriginToken    = "auth.token"
	OriginConfig   = "auth.keys"
	OriginKeysFile = "auth.keys_file"
	OriginAdmin    = "admin"
)

// ConfigKeyID is the KeyID of a key from the config, from its digest.
func ConfigKeyID(d [32]byte) string { return "cfg-" + hex.EncodeToString(d[:6]) }

// Operator reports whether id may see the whole gateway: providers, their
// traffic and health, every tenant's spend, /metrics. True for an admin
// key, and when auth is off (id nil: whoever reaches the gateway runs it).
// A tenant sees only its own usage and the models it may call.
func Operator(id *Identity) bool { return id == nil || id.Admin }

// Label is the tenant's metric label: its name, or "anonymous".
func (id *Identity) Label() string {
	if id == nil || id.Tenant == "" {
		return "anonymous"
	}
	return id.Tenant
}

// Budgeted reports whether spend is capped for id.
func (id *Identity) Budgeted() bool { return id != nil && id.BudgetNano != nil }

// Table is the compiled key table of one config.
type Table struct {
	byDigest map[[32]byte]*Identity
	tenants  []*Identity
	// keys lists every identity once per key, config keys in source order
	// (token, auth.keys, keys file), each sorted by KeyID.
	keys []*Identity
	// everIssued: the admin API holds key records (revoked ones included).
	everIssued bool
}

// Compile builds the table from a validated config's auth section and
// the keys issued at runtime (nil: none).
func Compile(a *config.Auth, issued *Issued) *Table {
	t := &Table{byDigest: map[[32]byte]*Identity{}}
	if a.Token != "" {
		d := sha256.Sum256([]byte(a.Token))
		id := &Identity{Anonymous: true, Admin: true, BudgetWindowSecs: config.DefaultBudgetWindowSecs, KeyID: ConfigKeyID(d), Origin: OriginToken}
		t.byDigest[d] = id
		t.keys = append(t.keys, id)
	}
	byTenant := map[string]*Identity{}
	add := func(keys map[string]*config.KeySpec, origin string) {
		first := len(t.keys)
		// Sorted so that shared identities are built deterministically.
		ks := make([]string, 0, len(keys))
		for k := range keys {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		for _, k := range ks {
			d, err := config.KeyDigest(k)
			if err != nil {
				continue // validation refused such a config already
			}
			spec := keys[k]
			id := fromSpec(spec)
			id.KeyID, id.Origin = ConfigKeyID(d), origin
			t.keys = append(t.keys, id)
			if byTenant[spec.Tenant] == nil {
				byTenant[spec.Tenant] = id
				t.tenants = append(t.tenants, id)
			}
			t.byDigest[d] = id
		}
		slices.SortFunc(t.keys[first:], func(x, y *Identity) int { return cmp.Compare(x.KeyID, y.KeyID) })
	}
	add(a.Keys, OriginConfig)
	add(a.FileKeys, OriginKeysFile)
	t.addIssued(issued, byTenant)
	slices.SortFunc(t.tenants, func(x, y *Identity) int { return cmp.Compare(x.Tenant, y.Tenant) })
	return t
}

func fromSpec(s *config.KeySpec) *Identity {
	id := &Identity{Tenant: s.Tenant, Tier: s.Tier, RPM: s.RPM, TPM: s.TPM, DailyRequests: s.DailyRequests,
		BudgetWindowSecs: s.WindowSecs(), AllowUnpriced: s.BudgetAllowUnpriced, Admin: s.Role == config.RoleAdmin}
	if n, ok := s.BudgetNano(); ok {
		id.BudgetNano = &n
	}
	return id
}

// Enabled reports whether any key is configured (auth on).
// Keys issued at runtime count even when all are revoked: revoking the
// last one must not open the gateway to everyone.
func (t *Table) Enabled() bool { return len(t.byDigest) > 0 || t.everIssued }

// Lookup returns the identity of a presented key.
func (t *Table) Lookup(presented string) (*Identity, bool) {
	if presented == "" {
		return nil, false
	}
	id, ok := t.byDigest[sha256.Sum256([]byte(presented))]
	return id, ok
}

// LookupDigest returns the identity of a key by its SHA-256 digest (a
// queued job carries the digest, never the key).
func (t *Table) LookupDigest(d [32]byte) (*Identity, bool) {
	id, ok := t.byDigest[d]
	return id, ok
}

// Tenants lists the named identities, sorted by tenant.
func (t *Table) Tenants() []*Identity { return t.tenants }

// Keys lists one identity per key (see Table.keys for the order).
func (t *Table) Keys() []*Identity { return t.keys }
