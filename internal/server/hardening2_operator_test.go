package server

import (
	"testing"

	"github.com/tidwall/gjson"
)

// Issue 27, item 8: auth.admin_token opens every operator view, as an
// admin key does: the dashboard's data (so the /admin page's link to the
// dashboard works with the token it was opened with), the health detail
// with providers, and /v1/usage for any tenant (?tenant=). It is still no
// /v1 key: inference refuses it. A tenant key reads only its own usage.
func TestAdminTokenOpensOperatorViews(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a")+`auth:
  admin_token: adm-secret
  keys:
    sk-acme: {tenant: acme, rpm: 60}
    sk-beta: {tenant: beta}
`)
	bearer := func(k string) []string { return []string{"Authorization", "Bearer " + k} }
	g.must(chatAs(g, "sk-acme", "m"), 200)
	if a := g.get("/dashboard/data", bearer("adm-secret")...); a.Status != 200 || gjson.Get(a.Body, "role").String() == "tenant" ||
		!gjson.Get(a.Body, "models.0.providers.0.name").Exists() {
		t.Errorf("dashboard data: %d %.300s", a.Status, a.Body)
	}
	if a := g.get("/v1/health/detail", bearer("adm-secret")...); a.Status != 200 || !gjson.Get(a.Body, "providers.m.providers.a").Exists() {
		t.Errorf("health detail: %d %.300s", a.Status, a.Body)
	}
	if a := g.get("/v1/usage", bearer("adm-secret")...); a.Status != 200 {
		t.Errorf("usage: %d %s", a.Status, a.Body)
	}
	a := g.get("/v1/usage?tenant=acme", bearer("adm-secret")...)
	if a.Status != 200 || gjson.Get(a.Body, "tenant").String() != "acme" || gjson.Get(a.Body, "requests_today").Int() != 1 ||
		gjson.Get(a.Body, "limits.rpm.limit").Int() != 60 {
		t.Errorf("usage of acme: %d %s", a.Status, a.Body)
	}
	if a := g.get("/v1/usage?tenant=ghost", bearer("adm-secret")...); a.Status != 404 {
		t.Errorf("an unknown tenant: %d %s", a.Status, a.Body)
	}
	// Still no /v1 key, and a tenant sees only its own.
	if a := g.post("/v1/chat/completions", chatBody, bearer("adm-secret")...); a.Status != 401 {
		t.Errorf("inference with the admin token: %d", a.Status)
	}
	if a := g.get("/v1/usage?tenant=acme", bearer("sk-beta")...); a.Status != 403 {
		t.Errorf("a tenant reading another's usage: %d %s", a.Status, a.Body)
	}
	if a := g.get("/v1/usage?tenant=beta", bearer("sk-beta")...); a.Status != 200 || gjson.Get(a.Body, "tenant").String() != "beta" {
		t.Errorf("a tenant reading its own usage: %d %s", a.Status, a.Body)
	}
	if a := g.get("/dashboard/data", bearer("sk-beta")...); gjson.Get(a.Body, "role").String() != "tenant" {
		t.Errorf("a tenant's dashboard: %.200s", a.Body)
	}
	if a := g.get("/dashboard/data", bearer("wrong")...); a.Status != 401 {
		t.Errorf("a wrong token: %d", a.Status)
	}
}
