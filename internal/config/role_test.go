package config

import (
	"strings"
	"testing"
)

func TestKeyRole(t *testing.T) {
	base := "providers:\n  p: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: p}]\nauth:\n  keys:\n"
	tests := []struct {
		entry, err string
	}{
		{`    k: {tenant: a, role: admin}`, ""},
		{`    k: {tenant: a, role: tenant}`, ""},
		{`    k: {tenant: a}`, ""},
		{`    k: {tenant: a, role: root}`, `test.yaml:8: auth.keys[#1].role: must be "tenant" or "admin", got "root"`},
	}
	for _, tt := range tests {
		c, err := Parse([]byte(base+tt.entry+"\n"), "test.yaml")
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.entry, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: got %v, want %s", tt.entry, err, tt.err)
		case tt.err == "" && !strings.Contains(tt.entry, "role: admin") && c.Auth.Keys["k"].Role == RoleAdmin:
			t.Errorf("%s: admin by default", tt.entry)
		}
	}
}
