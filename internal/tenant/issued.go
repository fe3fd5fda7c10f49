package tenant

import (
	"time"

	"switchboard/internal/config"
)

// Issued is what the admin API issued at runtime: tenants with their
// limits, and keys known by their SHA-256 digest.
type Issued struct {
	// Tenants maps a tenant name to its limits (Spec.Tenant is the name;
	// Role and Tier are unused).
	Tenants map[string]*config.KeySpec
	Keys    []IssuedKey
	// Recorded: the admin API holds key records, revoked ones included;
	// auth then stays on even when none is live.
	Recorded bool
}

// IssuedKey is one live (not revoked) issued key.
type IssuedKey struct {
	Digest [32]byte
	// Previous, when not zero, is the digest of the secret a rotation
	// replaced, working until PreviousUntil.
	Previous      [32]byte
	PreviousUntil time.Time
	ID, Name      string
	Tenant, Role  string
	Tier          int
	ExpiresAt     time.Time
	// Models: nil = every model.
	Models []string
	// RPM, TPM, DailyRequests, BudgetUSD and BudgetWindowSecs: the key's
	// own limits (nil = none beyond its tenant's).
	RPM, TPM, DailyRequests *int64
	BudgetUSD               *float64
	BudgetWindowSecs        *int64
}

// addIssued adds issued tenants and keys. A key takes its tenant's limits
// from an issued tenant, else from the config's keys of that tenant; a key
// whose tenant is neither is left out (it authenticates as nobody). A
// config key's digest is never overridden.
func (t *Table) addIssued(is *Issued, byTenant map[string]*Identity) {
	if is == nil {
		return
	}
	t.everIssued = is.Recorded
	limits := func(name string) *Identity {
		if spec := is.Tenants[name]; spec != nil {
			return fromSpec(spec)
		}
		if id := byTenant[name]; id != nil {
			c := *id
			return &c
		}
		return nil
	}
	for name, spec := range is.Tenants {
		if byTenant[name] == nil {
			id := fromSpec(spec)
			id.Origin = OriginAdmin
			byTenant[name] = id
			t.tenants = append(t.tenants, id)
		}
	}
	for i := range is.Keys {
		k := &is.Keys[i]
		id := limits(k.Tenant)
		if id == nil {
			continue
		}
		id.Tenant, id.Tier, id.Admin, id.Anonymous = k.Tenant, k.Tier, k.Role == config.RoleAdmin, false
		id.KeyID, id.KeyName, id.Origin, id.ExpiresAt = k.ID, k.Name, OriginAdmin, k.ExpiresAt
		id.KeyRPM, id.KeyTPM, id.KeyDailyRequests = k.RPM, k.TPM, k.DailyRequests
		ks := config.KeySpec{BudgetUSD: k.BudgetUSD, BudgetWindowSecs: k.BudgetWindowSecs}
		if n, ok := ks.BudgetNano(); ok {
			id.KeyBudgetNano = &n
		}
		id.KeyBudgetWindowSecs = ks.WindowSecs()
		if k.Models != nil {
			id.Models = make(map[string]bool, len(k.Models))
			for _, m := range k.Models {
				id.Models[m] = true
			}
		}
		if _, taken := t.byDigest[k.Digest]; taken {
			continue
		}
		t.byDigest[k.Digest] = id
		t.keys = append(t.keys, id)
		if k.Previous != ([32]byte{}) && !k.PreviousUntil.IsZero() {
			if _, taken := t.byDigest[k.Previous]; !taken {
				old := *id
				if old.ExpiresAt.IsZero() || k.PreviousUntil.Before(old.ExpiresAt) {
					old.ExpiresAt = k.PreviousUntil
				}
				t.byDigest[k.Previous] = &old
			}
		}
	}
}
