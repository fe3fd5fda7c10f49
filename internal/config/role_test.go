package config

import (
	"fmt"
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

func TestFirstByteAndShutdownDelay(t *testing.T) {
	base := "providers:\n  p: {type: mock}\nmodels:\n  - name: m\n%s    providers: [{provider: p}]\n%s"
	tests := []struct {
		model, extra, err string
		global, per       float64 // seconds, when valid
	}{
		{"", "", "", 0, 0},
		{"", "timeouts: {first_byte: 0.5, shutdown_delay: 10}\n", "", 0.5, 0.5},
		{"    first_byte_timeout: 3\n", "timeouts: {first_byte: 10}\n", "", 10, 3},
		{"    first_byte_timeout: false\n", "timeouts: {first_byte: 10}\n", "", 10, 0},
		{"", "timeouts: {first_byte: 0.01}\n", "timeouts.first_byte: must be between 100ms and 86400s", 0, 0},
		{"    first_byte_timeout: 0\n", "", "first_byte_timeout: must be between 100ms and 86400s, got 0s (use false to disable)", 0, 0},
		{"", "timeouts: {shutdown_delay: 7200}\n", "timeouts.shutdown_delay: must be between 0s and 3600s", 0, 0},
	}
	for _, tt := range tests {
		c, err := Parse([]byte(fmt.Sprintf(base, tt.model, tt.extra)), "t.yaml")
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q %q: got %v, want %s", tt.model, tt.extra, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q %q: %v", tt.model, tt.extra, err)
		}
		if g, p := c.Timeouts.FirstByte.D().Seconds(), c.FirstByteFor(c.Model("m")).Seconds(); g != tt.global || p != tt.per {
			t.Errorf("%q %q: first_byte %v, for m %v", tt.model, tt.extra, g, p)
		}
	}
}

func TestNoOperatorWarning(t *testing.T) {
	base := "providers:\n  p: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: p}]\n"
	tests := []struct {
		auth string
		warn bool
	}{
		{"", false},
		{"auth:\n  keys:\n    k: {tenant: a}\n", true},
		{"auth:\n  keys:\n    k: {tenant: a}\n    o: {tenant: ops, role: admin}\n", false},
		{"auth:\n  metrics_token: m\n  keys:\n    k: {tenant: a}\n", false},
		{"auth:\n  token: t\n", false},
	}
	for _, tt := range tests {
		c, err := Parse([]byte(base+tt.auth), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(strings.Join(c.Warnings, "\n"), "no key has role: admin")
		if got != tt.warn {
			t.Errorf("%q: warned %v, want %v (%q)", tt.auth, got, tt.warn, c.Warnings)
		}
	}
}

// TestAdminTokenChecked: auth.admin_token must be a plain token distinct
// from auth.token and every gateway key; messages never quote it.
func TestAdminTokenChecked(t *testing.T) {
	base := "providers:\n  p: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: p}]\n"
	tests := []struct {
		auth, err string
	}{
		{"auth: {admin_token: adm-1}\n", ""},
		{"auth: {admin_token: same, token: same}\n", "auth.admin_token: equals auth.token"},
		{"auth:\n  admin_token: dup-key\n  keys:\n    dup-key: {tenant: a}\n", "equals auth.admin_token"},
		{"auth: {admin_token: \"has space\"}\n", "auth.admin_token: must be a plaintext token"},
		{"auth: {admin_token: \"sha256:" + strings.Repeat("a", 64) + "\"}\n", "auth.admin_token: must be a plaintext token"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(base+tt.auth), "t.yaml")
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%q: %v", tt.auth, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: err %v, want %q", tt.auth, err, tt.err)
		case err != nil && (strings.Contains(err.Error(), "dup-key") || strings.Contains(err.Error(), "has space")):
			t.Errorf("%q: the error quotes the secret: %v", tt.auth, err)
		}
	}
}
