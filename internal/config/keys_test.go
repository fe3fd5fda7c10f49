package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAdmissionDefaults(t *testing.T) {
	c, err := parse([]byte(minimal), "t.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"max_concurrency", c.Limits.MaxConcurrency, 256},
		{"queue_timeout", c.Limits.QueueTimeout, Duration(5 * time.Second)},
		{"penalty", c.Limits.PenaltySeconds, 5},
		{"rpm", c.Limits.RPM, (*int64)(nil)},
		{"tpm", c.Limits.TPM, (*int64)(nil)},
		{"advisory", c.Limits.AdvisoryHeaders, false},
		{"store", c.Store, Store{Backend: StoreSQLite}},
		{"retained", c.Spend.MaxRetainedAttempts, 100000},
		{"provider limits", [3]any{c.Providers["p"].MaxConcurrency, c.Providers["p"].RPM, c.Providers["p"].TPM},
			[3]any{(*int)(nil), (*int64)(nil), (*int64)(nil)}},
		{"keys", c.Auth.Keys, map[string]*KeySpec(nil)},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestAdmissionFields(t *testing.T) {
	t.Setenv("ACME_KEY", "sk-acme-from-env")
	c, err := Parse([]byte(`providers:
  p:
    base_url: "https://p.example"
    api_key: k
    max_concurrency: 8
    rpm: 0
    tpm: 50000
models: [{name: m, providers: [{provider: p}]}]
limits:
  max_concurrency: 10
  queue_timeout: 250ms
  rpm: 600
  tpm: 0
  penalty_seconds: 0
  advisory_headers: true
store: {backend: memory}
spend: {max_retained_attempts: 7}
auth:
  keys:
    ${ACME_KEY}: {tenant: acme, tier: 2, rpm: 60, tpm: 100000, daily_requests: 1000, budget_usd: 100, budget_window_secs: 3600}
    "sha256:`+strings.Repeat("ab", 32)+`": {tenant: beta, budget_usd: 0, budget_allow_unpriced: true}
pricing:
  p:
    m: {input: 1.5, output: 2, context: 1000, max_output: 100, tiers: [{above: 500, input: 3}]}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	i64 := func(v int64) *int64 { return &v }
	p := c.Providers["p"]
	if *p.MaxConcurrency != 8 || *p.RPM != 0 || *p.TPM != 50000 {
		t.Errorf("provider limits = %v %v %v", *p.MaxConcurrency, *p.RPM, *p.TPM)
	}
	want := Limits{MaxRequestBody: 10 << 20, MaxConcurrency: 10, QueueTimeout: Duration(250 * time.Millisecond),
		RPM: i64(600), TPM: i64(0), PenaltySeconds: 0, AdvisoryHeaders: true, AdvisoryPrefix: DefaultAdvisoryPrefix, Window: Windows{WindowBucket, WindowBucket},
		BodyTimeout: Duration(30 * time.Second), MaxBufferedBytes: 512 << 20, TenantCounting: CountRequests}
	if !reflect.DeepEqual(c.Limits, want) {
		t.Errorf("limits = %+v, want %+v", c.Limits, want)
	}
	if c.Store.Backend != StoreMemory || c.Spend.MaxRetainedAttempts != 7 {
		t.Errorf("store %+v spend %+v", c.Store, c.Spend)
	}
	acme := c.Auth.Keys["sk-acme-from-env"]
	if acme == nil {
		t.Fatalf("env key not expanded: %v", c.Auth.Keys)
	}
	if acme.Tenant != "acme" || acme.Tier != 2 || *acme.RPM != 60 || *acme.DailyRequests != 1000 || acme.WindowSecs() != 3600 {
		t.Errorf("acme = %+v", acme)
	}
	if n, ok := acme.BudgetNano(); !ok || n != 100_000_000_000 {
		t.Errorf("budget nano = %d %v", n, ok)
	}
	beta := c.Auth.Keys["sha256:"+strings.Repeat("ab", 32)]
	if n, ok := beta.BudgetNano(); !ok || n != 0 || !beta.BudgetAllowUnpriced || beta.WindowSecs() != 86400 {
		t.Errorf("beta = %+v", beta)
	}
	pr := c.Pricing["p"]["m"]
	if *pr.Input != 1.5 || *pr.MaxOutput != 100 || pr.Tiers[0].Above != 500 || pr.Output == nil || pr.CacheRead != nil {
		t.Errorf("pricing = %+v", pr)
	}
}

func TestKeyDigest(t *testing.T) {
	plain := sha256.Sum256([]byte("sk-live"))
	tests := []struct {
		key  string
		want [32]byte
		err  string
	}{
		{"sk-live", plain, ""},
		{"sha256:" + hex.EncodeToString(plain[:]), plain, ""},
		{"sha256:" + strings.ToUpper(hex.EncodeToString(plain[:])), plain, ""},
		{"sha256:abc", [32]byte{}, "64 hex digits"},
		{"", [32]byte{}, "must not be empty"},
		{"sk live", [32]byte{}, "spaces"},
	}
	for _, tt := range tests {
		got, err := KeyDigest(tt.key)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("KeyDigest(%q) err = %v, want %q", tt.key, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("KeyDigest(%q) = %x, %v", tt.key, got, err)
		}
	}
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKeysFile(t *testing.T) {
	dir := t.TempDir()
	sum := sha256.Sum256([]byte("sk-hashed"))
	writeFile(t, dir, "keys.json", `{
  "sk-example": {"tenant": "acme", "tier": 1, "rpm": 60, "tpm": 100000, "budget_usd": 100, "budget_window_secs": 86400, "budget_allow_unpriced": false},
  "sha256:`+hex.EncodeToString(sum[:])+`": {"tenant": "acme", "tier": 2, "rpm": 60, "tpm": 100000, "budget_usd": 100},
  "sk-free": {"tenant": "free", "daily_requests": 10}
}`)
	cfgPath := writeFile(t, dir, "config.yaml", minimal+"auth:\n  keys_file: keys.json\n")
	c, err := Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	fk := c.Auth.FileKeys
	if len(fk) != 3 || fk["sk-example"].Tenant != "acme" || *fk["sk-free"].DailyRequests != 10 {
		t.Fatalf("file keys = %+v", fk)
	}
	if c.Auth.KeysPath != filepath.Join(dir, "keys.json") {
		t.Errorf("keys path = %q", c.Auth.KeysPath)
	}
	if got := fk["sk-free"].Source; got != filepath.Join(dir, "keys.json")+":4" {
		t.Errorf("source = %q", got)
	}
}

// Each case is a keys file (or YAML keys) that must be refused with these
// errors, as `switchboard check` prints them.
func TestKeysErrors(t *testing.T) {
	tests := []struct {
		name, keys, yaml string
		want             []string
	}{
		{"missing file", "", "auth:\n  keys_file: nope.json\n",
			[]string{"config.yaml:8: auth.keys_file: cannot read keys file: open "}},
		{"not json", "{\n  \"k\": {\"tenant\": \"a\",}\n}", "",
			[]string{"keys.json:2: auth.keys_file: invalid keys file: invalid character '}'"}},
		{"not an object", "[1]", "", []string{"keys.json:1: auth.keys_file: invalid keys file: the top level is not an object"}},
		{"truncated", "{\"k\": {\"tenant\": \"a\"}", "", []string{"keys.json:1: auth.keys_file: invalid keys file: unexpected end of file"}},
		{"entry rules", `{
  "sk-a": {"tenant": "a", "rmp": 5},
  "sk-b": {"tenant": "", "rpm": -1, "budget_usd": 9007200, "budget_window_secs": 10},
  "sk-c": {"tenant": "c", "tpm": "many"},
  "sk-d": 5,
  "sha256:zz": {"tenant": "d"},
  "sk-a": {"tenant": "a"}
}`, "", []string{
			`keys.json:2: auth.keys_file[#1]: unknown field "rmp" (known: tenant, tier, rpm`,
			"keys.json:3: auth.keys_file[#2].tenant: required",
			"keys.json:3: auth.keys_file[#2].rpm: must be between 0 and 1000000000, got -1",
			"keys.json:3: auth.keys_file[#2].budget_usd: must be finite, at least 0 and at most 9007199.254740992 (2^53 nano-USD), got 9007200",
			"keys.json:3: auth.keys_file[#2].budget_window_secs: must be between 60 and 31536000, got 10",
			"keys.json:4: auth.keys_file[#3]: tpm: want an integer, got \"many\"",
			"keys.json:5: auth.keys_file[#4]: want an object",
			`keys.json:6: auth.keys_file[#5]: want "sha256:" followed by 64 hex digits`,
			"keys.json:7: auth.keys_file[#6]: duplicate key (first at line 2)",
		}},
		{"tenants disagree and keys collide", `{"sk-one": {"tenant": "t", "rpm": 1}, "sk-two": {"tenant": "t", "rpm": 2}}`,
			"auth:\n  token: sk-tok\n  keys_file: keys.json\n  keys:\n    sk-one: {tenant: t, rpm: 1}\n    sk-tok: {tenant: u}\n    \"sha256:" +
				hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte("sk-two")); return s[:] }()) + "\": {tenant: t, rpm: 2}\n",
			[]string{
				"config.yaml:11: auth.keys[#1]: ...",
				"config.yaml:12: auth.keys[#2]: equals auth.token",
				"config.yaml:13: auth.keys[#3]: tenant \"t\" has other limits at auth.keys[#1] (config.yaml:11)",
				"keys.json:1: auth.keys_file[#1]: the same key as auth.keys[#1]",
				"keys.json:1: auth.keys_file[#2]: the same key as auth.keys[#3]",
				"keys.json:1: auth.keys_file[#2]: tenant \"t\" has other limits at auth.keys[#1]",
			}},
		{"yaml entry rules", "", "auth:\n  keys:\n    sk-x: {tenant: x, budget_usd: .nan, colour: red}\n    \"\": {tenant: y}\n",
			[]string{
				"config.yaml:9: auth.keys[#1].colour: unknown field",
				"config.yaml:9: auth.keys[#1].budget_usd: must be finite",
				"config.yaml:10: auth.keys[#2]: key must not be empty",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			y := tt.yaml
			if tt.keys != "" {
				writeFile(t, dir, "keys.json", tt.keys)
				if y == "" {
					y = "auth:\n  keys_file: keys.json\n"
				}
			}
			cfgPath := writeFile(t, dir, "config.yaml", minimal+y)
			_, err := Load(cfgPath)
			var es *Errors
			if !errors.As(err, &es) {
				t.Fatalf("err = %v, want *Errors", err)
			}
			msg := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
			for _, w := range tt.want {
				if strings.HasSuffix(w, "...") {
					continue // a placeholder: no error expected on that entry
				}
				if !strings.Contains(msg, w) {
					t.Errorf("missing %q in:\n%s", w, msg)
				}
			}
			real := 0
			for _, w := range tt.want {
				if !strings.HasSuffix(w, "...") {
					real++
				}
			}
			if len(*es) != real {
				t.Errorf("got %d errors, want %d:\n%s", len(*es), real, msg)
			}
			for _, secret := range []string{"sk-a", "sk-b", "sk-one", "sk-two", "sk-tok", "sk-x"} {
				if strings.Contains(msg, secret) {
					t.Errorf("message leaks key %q:\n%s", secret, msg)
				}
			}
		})
	}
}

func TestAdmissionRanges(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"limits", "limits:\n  max_concurrency: 0\n  queue_timeout: 2h\n  rpm: -1\n  tpm: 1000000000001\n  penalty_seconds: 3601\n", []string{
			"t.yaml:8: limits.max_concurrency: must be between 1 and 1000000",
			"t.yaml:9: limits.queue_timeout: must be between 0s and 3600s",
			"t.yaml:10: limits.rpm: must be between 0 and 1000000000, got -1",
			"t.yaml:11: limits.tpm: must be between 0 and 1000000000000",
			"t.yaml:12: limits.penalty_seconds: must be between 0 and 3600",
		}},
		{"store and spend", "store:\n  backend: redis\nspend:\n  max_retained_attempts: 0\n", []string{
			`t.yaml:8: store.backend: must be one of sqlite, memory, got "redis"`,
			"t.yaml:10: spend.max_retained_attempts: must be between 1 and 10000000",
		}},
		{"memory with path", "store:\n  backend: memory\n  path: x.db\n", []string{
			"t.yaml:9: store.path: only used with backend: sqlite",
		}},
		{"pricing", "pricing:\n  nope: {m: {input: 1}}\n  p:\n    m:\n      input: -1\n      output: .inf\n      context: 0\n      max_output: -1\n      tiers: [{above: 10}, {above: 10, output: -2}]\n", []string{
			`t.yaml:8: pricing.nope: unknown provider "nope" (known: p)`,
			"t.yaml:11: pricing.p.m.input: must be between 0 and 1e+06, got -1",
			"t.yaml:12: pricing.p.m.output: must be between 0 and 1e+06, got +Inf",
			"t.yaml:13: pricing.p.m.context: must be between 1 and 100000000, got 0",
			"t.yaml:14: pricing.p.m.max_output: must be between 0 and 100000000, got -1",
			"t.yaml:15: pricing.p.m.tiers[1].above: must be greater than the previous tier's (10)",
			"t.yaml:15: pricing.p.m.tiers[1].output: must be between 0 and 1e+06, got -2",
		}},
		{"provider limits", strings.Replace(minimal, "api_key: k}", "api_key: k, max_concurrency: 0, rpm: 1000000001, tpm: -5}", 1), []string{
			"t.yaml:2: providers.p.max_concurrency: must be between 1 and 100000, got 0",
			"t.yaml:2: providers.p.rpm: must be between 0 and 1000000000",
			"t.yaml:2: providers.p.tpm: must be between 0 and 1000000000000, got -5",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := tt.yaml
			if !strings.HasPrefix(y, "providers:") {
				y = minimal + y
			}
			_, err := parse([]byte(y), "t.yaml", noEnv)
			var es *Errors
			if !errors.As(err, &es) {
				t.Fatalf("err = %v", err)
			}
			if len(*es) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(*es), len(tt.want), err)
			}
			for i, w := range tt.want {
				if got := (*es)[i].Error(); !strings.HasPrefix(got, w) {
					t.Errorf("error %d = %q, want prefix %q", i, got, w)
				}
			}
		})
	}
}
