package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestAdminGuard: the admin plane opens to an admin key or
// auth.admin_token only; a tenant key gets 403, no or a wrong key 401,
// and with no auth at all it stays closed (403) unless admin_token is set.
func TestAdminGuard(t *testing.T) {
	keyed := startGateway(t, mockYAML("m", "a")+`auth:
  admin_token: adm-secret
  keys:
    sk-ops: {tenant: ops, role: admin}
    sk-acme: {tenant: acme}
`)
	open := startGateway(t, mockYAML("m", "a"))
	tokenOnly := startGateway(t, mockYAML("m", "a")+"auth: {admin_token: adm-only}\n")
	tests := []struct {
		name   string
		g      *gateway
		key    string
		status int
		code   string
	}{
		{"admin key", keyed, "Bearer sk-ops", 200, ""},
		{"admin token", keyed, "Bearer adm-secret", 200, ""},
		{"tenant key", keyed, "Bearer sk-acme", 403, "admin_required"},
		{"no key", keyed, "", 401, "invalid_api_key"},
		{"unknown key", keyed, "Bearer sk-nope", 401, "invalid_api_key"},
		{"auth off", open, "", 403, "admin_disabled"},
		{"auth off, any key", open, "Bearer whatever", 403, "admin_disabled"},
		{"admin token only: token", tokenOnly, "Bearer adm-only", 200, ""},
		{"admin token only: none", tokenOnly, "", 401, "invalid_api_key"},
		{"admin token only: wrong", tokenOnly, "Bearer adm-onl", 401, "invalid_api_key"},
	}
	for _, tt := range tests {
		a := tt.g.get("/admin/v1/keys", "Authorization", tt.key)
		if a.Status != tt.status {
			t.Errorf("%s: status %d, want %d: %s", tt.name, a.Status, tt.status, a.Body)
			continue
		}
		if tt.code != "" && gjson.Get(a.Body, "error.code").String() != tt.code {
			t.Errorf("%s: code %s, want %s: %s", tt.name, gjson.Get(a.Body, "error.code"), tt.code, a.Body)
		}
		if strings.Contains(a.Body, "adm-secret") || strings.Contains(a.Body, "sk-acme") || strings.Contains(a.Body, "sk-ops") {
			t.Errorf("%s: a secret in the answer: %s", tt.name, a.Body)
		}
	}
	// Config keys are listed read-only, by id, never by value.
	a := keyed.get("/admin/v1/keys", "Authorization", "Bearer sk-ops")
	if n := gjson.Get(a.Body, "data.#").Int(); n != 2 {
		t.Fatalf("keys listed: %d: %s", n, a.Body)
	}
	for _, k := range gjson.Get(a.Body, "data").Array() {
		if !strings.HasPrefix(k.Get("id").String(), "cfg-") || !k.Get("read_only").Bool() || k.Get("source").String() != "auth.keys" {
			t.Errorf("config key shown as %s", k.Raw)
		}
	}
	if a := keyed.post("/admin/v1/keys", "{", "Authorization", "Bearer sk-acme"); a.Status != 403 {
		t.Errorf("tenant key POST: %d", a.Status)
	}
}

// TestIssuedKeysTurnAuthOn: on a gateway without config keys, issuing a
// key turns auth on for /v1 and /metrics, and revoking the last one does
// not turn it off again.
func TestIssuedKeysTurnAuthOn(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a")+"auth: {admin_token: adm}\n")
	if a := g.get("/v1/models"); a.Status != 200 {
		t.Fatalf("auth off: %d", a.Status)
	}
	a := g.post("/admin/v1/tenants", `{"name":"t"}`, "Authorization", "Bearer adm")
	if a.Status != 201 {
		t.Fatal(a.Body)
	}
	a = g.post("/admin/v1/keys", `{"name":"k","tenant":"t"}`, "Authorization", "Bearer adm")
	secret, id := gjson.Get(a.Body, "secret").String(), gjson.Get(a.Body, "id").String()
	for _, tt := range []struct {
		path, key string
		want      int
	}{{"/v1/models", "", 401}, {"/v1/models", secret, 200}, {"/metrics", "", 401}, {"/metrics", secret, 403}, {"/metrics", "adm", 200}} {
		if a := g.get(tt.path, "Authorization", "Bearer "+tt.key); a.Status != tt.want {
			t.Errorf("%s with %q after issuing: %d, want %d", tt.path, tt.key, a.Status, tt.want)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, g.URL+"/admin/v1/keys/"+id, nil)
	req.Header.Set("Authorization", "Bearer adm")
	if a := g.do(req); a.Status != 200 {
		t.Fatal(a.Body)
	}
	for _, key := range []string{"", secret} {
		if a := g.get("/v1/models", "Authorization", "Bearer "+key); a.Status != 401 {
			t.Errorf("/v1/models with %q after revoking the last key: %d, want 401", key, a.Status)
		}
	}
}

// TestAdminRouteLabels: admin paths map to a bounded set of metric labels
// whatever ids or junk a client puts in them.
func TestAdminRouteLabels(t *testing.T) {
	for path, want := range map[string]string{
		"/admin":                               "/admin",
		"/admin/v1/keys":                       "/admin/v1/keys",
		"/admin/v1/keys/key-0123456789ab":      "/admin/v1/keys/{id}",
		"/admin/v1/keys/key-1/rotate":          "/admin/v1/keys/{id}",
		"/admin/v1/tenants/acme":               "/admin/v1/tenants/{id}",
		"/admin/v1/audit":                      "/admin/v1/audit",
		"/admin/v1/overview":                   "/admin/v1/overview",
		"/admin/v1/" + strings.Repeat("x", 99): "/admin/v1/other",
		"/admin/v2/keys":                       "other",
	} {
		if got := routeLabel(path); got != want {
			t.Errorf("routeLabel(%q) = %q, want %q", path, got, want)
		}
	}
}
