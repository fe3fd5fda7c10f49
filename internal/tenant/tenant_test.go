package tenant

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchboard/internal/config"
)

const base = `providers:
  p: {base_url: "https://p.example", api_key: k}
models: [{name: m, providers: [{provider: p}]}]
`

func load(t *testing.T, yaml, keys string) (*config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	if keys != "" {
		if err := os.WriteFile(filepath.Join(dir, "keys.json"), []byte(keys), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(base+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(p)
}

func digest(s string) string {
	d := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(d[:])
}

func TestLookup(t *testing.T) {
	cfg, err := load(t, `auth:
  token: anon-token
  keys_file: keys.json
  keys:
    sk-yaml: {tenant: yaml-team, rpm: 5}
`, `{
  "sk-example": {"tenant": "acme", "tier": 1, "rpm": 60, "tpm": 100000, "budget_usd": 100, "budget_window_secs": 86400, "budget_allow_unpriced": false},
  "`+digest("sk-hidden")+`": {"tenant": "acme", "tier": 3, "rpm": 60, "tpm": 100000, "budget_usd": 100},
  "sk-free": {"tenant": "free", "daily_requests": 0, "budget_usd": 0.5, "budget_allow_unpriced": true}
}`)
	if err != nil {
		t.Fatal(err)
	}
	tab := Compile(&cfg.Auth, nil)
	if !tab.Enabled() {
		t.Fatal("not enabled")
	}
	tests := []struct {
		key    string
		ok     bool
		tenant string
		tier   int
		check  func(*Identity) bool
	}{
		{"sk-example", true, "acme", 1, func(id *Identity) bool {
			return *id.RPM == 60 && *id.BudgetNano == 100e9 && id.BudgetWindowSecs == 86400
		}},
		{"sk-hidden", true, "acme", 3, func(id *Identity) bool { return *id.TPM == 100000 }},
		{digest("sk-hidden"), false, "", 0, nil}, // the stored digest is not itself a key
		{"sk-free", true, "free", 0, func(id *Identity) bool {
			return *id.DailyRequests == 0 && *id.BudgetNano == 5e8 && id.AllowUnpriced && id.RPM == nil
		}},
		{"sk-yaml", true, "yaml-team", 0, func(id *Identity) bool { return *id.RPM == 5 && id.BudgetNano == nil }},
		{"anon-token", true, "", 0, func(id *Identity) bool { return id.Anonymous && id.RPM == nil && id.Label() == "anonymous" }},
		{"sk-exampl", false, "", 0, nil},
		{"", false, "", 0, nil},
	}
	for _, tt := range tests {
		id, ok := tab.Lookup(tt.key)
		if ok != tt.ok {
			t.Errorf("Lookup(%q) ok = %v", tt.key, ok)
			continue
		}
		if !ok {
			continue
		}
		if id.Tenant != tt.tenant || id.Tier != tt.tier || !tt.check(id) {
			t.Errorf("Lookup(%q) = %+v", tt.key, id)
		}
	}
	var names []string
	for _, id := range tab.Tenants() {
		names = append(names, id.Tenant)
	}
	if strings.Join(names, ",") != "acme,free,yaml-team" {
		t.Errorf("tenants = %v", names)
	}
}

func TestAuthOff(t *testing.T) {
	cfg, err := load(t, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if tab := Compile(&cfg.Auth, nil); tab.Enabled() {
		t.Error("enabled without keys")
	}
}

func TestInvalidKeysFileRefused(t *testing.T) {
	_, err := load(t, "auth:\n  keys_file: keys.json\n", `{"sk-a": {"tenant": "a", "rpm": "sixty"}}`)
	var es *config.Errors
	if !errors.As(err, &es) || !strings.Contains(err.Error(), "keys.json:1: auth.keys_file[#1]: rpm: want an integer, got \"sixty\"") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "sk-a") {
		t.Errorf("error leaks the key: %v", err)
	}
}

// TestKeyIDs: every config key, the auth.token identity included, has a
// stable non-secret id from its digest, and a stored digest names the same
// key as its plaintext would.
func TestKeyIDs(t *testing.T) {
	cfg, err := load(t, `auth:
  token: anon-token
  keys:
    sk-yaml: {tenant: yaml-team}
    "`+digest("sk-hidden")+`": {tenant: yaml-team}
`, "")
	if err != nil {
		t.Fatal(err)
	}
	tab := Compile(&cfg.Auth, nil)
	for _, k := range []string{"anon-token", "sk-yaml", "sk-hidden"} {
		id, ok := tab.Lookup(k)
		if !ok {
			t.Fatalf("%s unknown", k)
		}
		if want := "cfg-" + digest(k)[len("sha256:"):][:12]; id.KeyID != want {
			t.Errorf("%s: KeyID %q, want %q", k, id.KeyID, want)
		}
	}
	if n := len(tab.Keys()); n != 3 || tab.Keys()[0].Origin != OriginToken {
		t.Errorf("Keys() = %d entries, first %+v", n, tab.Keys()[0])
	}
}

// TestIssuedMerge: issued keys join the config's; a key takes its limits
// from an issued tenant, else from the config's tenant; a key of an unknown
// tenant, or one whose digest is a config key's, is left out.
func TestIssuedMerge(t *testing.T) {
	cfg, err := load(t, "auth:\n  keys:\n    sk-cfg: {tenant: acme, rpm: 5}\n", "")
	if err != nil {
		t.Fatal(err)
	}
	rpm := int64(9)
	d := func(s string) [32]byte { return sha256.Sum256([]byte(s)) }
	tab := Compile(&cfg.Auth, &Issued{
		Tenants: map[string]*config.KeySpec{"team": {Tenant: "team", RPM: &rpm}},
		Keys: []IssuedKey{
			{Digest: d("sk-team"), ID: "key-1", Name: "a", Tenant: "team", Role: config.RoleAdmin, Models: []string{"m"}},
			{Digest: d("sk-acme2"), ID: "key-2", Name: "b", Tenant: "acme", Tier: 4},
			{Digest: d("sk-ghost"), ID: "key-3", Name: "c", Tenant: "ghost"},
			{Digest: d("sk-cfg"), ID: "key-4", Name: "d", Tenant: "team"},
		},
	})
	tests := []struct {
		key      string
		ok       bool
		id       string
		rpm      int64
		admin    bool
		mayUseM2 bool
	}{
		{"sk-team", true, "key-1", 9, true, false},
		{"sk-acme2", true, "key-2", 5, false, true},
		{"sk-ghost", false, "", 0, false, false},
		{"sk-cfg", true, ConfigKeyID(d("sk-cfg")), 5, false, true},
	}
	for _, tt := range tests {
		id, ok := tab.Lookup(tt.key)
		if ok != tt.ok {
			t.Errorf("%s: ok %v", tt.key, ok)
			continue
		}
		if ok && (id.KeyID != tt.id || *id.RPM != tt.rpm || id.Admin != tt.admin || id.MayUse("m2") != tt.mayUseM2 || !id.MayUse("m")) {
			t.Errorf("%s: %+v", tt.key, id)
		}
	}
	if id, _ := tab.Lookup("sk-acme2"); id.Tier != 4 || id.Origin != OriginAdmin || id.Tenant != "acme" {
		t.Errorf("issued key of a config tenant: %+v", id)
	}
}
