package tenant

import (
	"fmt"
	"testing"

	"switchboard/internal/config"
)

// BenchmarkLookup is the per-request key to identity lookup (a SHA-256 of
// the presented key, then one map read), among 1,000 configured keys.
func BenchmarkLookup(b *testing.B) {
	keys := map[string]*config.KeySpec{}
	for i := range 1000 {
		keys[fmt.Sprintf("sk-tenant-%04d-0123456789abcdef0123456789", i)] = &config.KeySpec{Tenant: fmt.Sprintf("t%d", i%50)}
	}
	t := Compile(&config.Auth{Token: "sk-anonymous-0123456789abcdef", Keys: keys}, nil)
	for _, tc := range []struct {
		name, key string
		ok        bool
	}{
		{"hit", "sk-tenant-0421-0123456789abcdef0123456789", true},
		{"miss", "sk-tenant-9999-0123456789abcdef0123456789", false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := t.Lookup(tc.key); ok != tc.ok {
					b.Fatal("wrong lookup")
				}
			}
		})
	}
}
