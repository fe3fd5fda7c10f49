package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchboard/internal/operator"
	"switchboard/internal/usagelog"
)

// usageAdminYAML: two budgeted keys of one tenant, a tenant with limits, an
// admin; two priced models.
const usageAdminYAML = `providers:
  steady: {type: mock, mock: {tokens: 7}}
models:
  - name: plain
    providers: [{provider: steady, model: steady-m}]
  - name: other
    providers: [{provider: steady, model: steady-m}]
pricing:
  steady: {steady-m: {input: 3, output: 15, context: 10000, max_output: 100}}
auth:
  keys:
    k-acme: {tenant: acme, budget_usd: 10}
    k-acme-2: {tenant: acme, budget_usd: 10}
    k-beta: {tenant: beta, rpm: 50, daily_requests: 1000}
    k-admin: {tenant: ops, role: admin}
# Sliding: an admission counts for exactly 60 s, so the headroom a test
# reads does not refill while it runs.
limits: {window: {rpm: sliding}}
`

// overviewTraffic sends a few requests per key and waits for their rows.
func overviewTraffic(t *testing.T, g *gateway, ul *usagelog.Log) {
	t.Helper()
	for i, key := range []string{"k-acme", "k-acme-2", "k-beta", "k-beta", "k-acme", "k-beta"} {
		body := fmt.Sprintf(`{"model":%q,"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, []string{"plain", "other"}[i%2])
		if a := g.post("/v1/chat/completions", body, "Authorization", "Bearer "+key); a.Status != 200 {
			t.Fatalf("%d %s", a.Status, a.Body)
		}
	}
	waitRows(t, ul, 6)
}

// TestAdminOverview: the admin page's data lists every tenant with its
// spend against its budget and its limits' headroom, every key with its
// usage, and usage by model per hour; only for an admin.
func TestAdminOverview(t *testing.T) {
	g, _, ul := usageGateway(t, usageAdminYAML)
	overviewTraffic(t, g, ul)
	a := g.get("/admin/v1/overview", "Authorization", "Bearer k-admin")
	if a.Status != 200 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	acme := gjson.Get(a.Body, `tenants.#(tenant=="acme")`)
	if acme.Get("keys").Int() != 2 || acme.Get("requests_24h").Int() != 3 || acme.Get("spend.budget_nano_usd").Int() != 10e9 ||
		acme.Get("spend.settled_nano_usd").Int() != acme.Get("cost_nano_usd_24h").Int() || acme.Get("cost_nano_usd_24h").Int() <= 0 {
		t.Fatalf("acme: %s", acme.Raw)
	}
	beta := gjson.Get(a.Body, `tenants.#(tenant=="beta")`)
	if beta.Get("limits.rpm.limit").Int() != 50 || beta.Get("limits.rpm.remaining").Int() != 47 ||
		beta.Get("limits.daily_requests.remaining").Int() != 997 || beta.Get("spend.budget_nano_usd").Exists() {
		t.Fatalf("beta: %s", beta.Raw)
	}
	keys := gjson.Get(a.Body, "keys").Array()
	if len(keys) != 4 {
		t.Fatalf("keys: %s", gjson.Get(a.Body, "keys").Raw)
	}
	var acmeKeys int64
	for _, k := range keys {
		if !strings.HasPrefix(k.Get("id").String(), "cfg-") || strings.Contains(a.Body, "k-acme") {
			t.Fatalf("a key shown by more than its id: %s", k.Raw)
		}
		if k.Get("tenant").String() == "acme" {
			acmeKeys += k.Get("requests_24h").Int()
		}
	}
	if acmeKeys != 3 {
		t.Fatalf("acme's keys made %d requests, want 3", acmeKeys)
	}
	var plain int64
	for _, p := range gjson.Get(a.Body, "usage_by_model").Array() {
		if p.Get("model").String() == "plain" {
			plain += p.Get("requests").Int()
		}
	}
	if plain != 3 {
		t.Fatalf("usage_by_model: %s", gjson.Get(a.Body, "usage_by_model").Raw)
	}
	if a := g.get("/admin/v1/overview", "Authorization", "Bearer k-beta"); a.Status != 403 {
		t.Fatalf("tenant key: %d", a.Status)
	}
}

// TestAdminPageInChromium loads /admin in headless Chromium with an admin
// key and checks that the tenants, the keys, the budget bars, the
// headroom and the chart by model drew.
func TestAdminPageInChromium(t *testing.T) {
	bin := chromiumBin(t)
	g, _, ul := usageGateway(t, usageAdminYAML)
	overviewTraffic(t, g, ul)
	dom := chromiumDOM(t, bin, g.URL+"/admin#token=k-admin")
	for _, want := range []string{`data-tenant="acme"`, `data-tenant="beta"`, `data-budget="acme"`, `data-headroom="rpm"`,
		`47 of 50 left`, `spent of $10.00`, `data-held="0"`, `data-key="cfg-`, `class="badge admin"`, `data-chart="usage-by-model"`,
		`data-series="plain"`, `data-series="other"`, `data-legend="plain"`, `class="axis"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("DOM lacks %s", want)
		}
	}
	if strings.Contains(dom, "k-acme") {
		t.Error("a key's secret reached the page")
	}
	// Without a key the page says what it needs.
	if dom := chromiumDOM(t, bin, g.URL+"/admin"); !strings.Contains(dom, "needs an admin key") {
		t.Error("the page without a key does not say it needs an admin key")
	}
}

// cutYAML: four tenants, a name order in which the spenders come last.
const cutYAML = `providers:
  steady: {type: mock, mock: {tokens: 7}}
models:
  - name: plain
    providers: [{provider: steady, model: steady-m}]
pricing:
  steady: {steady-m: {input: 3, output: 15, context: 10000, max_output: 100}}
auth:
  keys:
    k-aa: {tenant: aa, budget_usd: 10}
    k-bb: {tenant: bb, budget_usd: 10}
    k-cc: {tenant: cc, budget_usd: 10}
    k-zz: {tenant: zz, budget_usd: 10}
    k-admin: {tenant: ops, role: admin}
`

// TestTenantListsCutByCost: when there are more tenants (keys) than the
// views list, /admin/v1/overview and /dashboard/data keep the biggest
// spenders, not the first names, and say that the list is cut and of
// how many; the pages show it.
func TestTenantListsCutByCost(t *testing.T) {
	defer func(t, k int) { operator.MaxDashTenants, operator.MaxOverviewKeys = t, k }(operator.MaxDashTenants, operator.MaxOverviewKeys)
	operator.MaxDashTenants, operator.MaxOverviewKeys = 2, 2
	g, _, ul := usageGateway(t, cutYAML)
	for _, key := range []string{"k-zz", "k-cc", "k-zz"} {
		if a := g.post("/v1/chat/completions", `{"model":"plain","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer "+key); a.Status != 200 {
			t.Fatalf("%d %s", a.Status, a.Body)
		}
	}
	waitRows(t, ul, 3)
	names := func(body, path string) string {
		var out []string
		for _, x := range gjson.Get(body, path).Array() {
			out = append(out, x.String())
		}
		return strings.Join(out, ",")
	}
	a := g.get("/admin/v1/overview", "Authorization", "Bearer k-admin")
	if a.Status != 200 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	// ops (the admin's tenant) and aa, bb come first by name but spent nothing.
	if got := names(a.Body, "tenants.#.tenant"); got != "zz,cc" {
		t.Errorf("overview tenants %q, want zz,cc", got)
	}
	if gjson.Get(a.Body, "tenants_total").Int() != 5 || !gjson.Get(a.Body, "tenants_truncated").Bool() {
		t.Errorf("overview: tenants_total %s, tenants_truncated %s", gjson.Get(a.Body, "tenants_total"), gjson.Get(a.Body, "tenants_truncated"))
	}
	if got := names(a.Body, "keys.#.tenant"); got != "zz,cc" {
		t.Errorf("overview keys of %q, want zz,cc", got)
	}
	if gjson.Get(a.Body, "keys_total").Int() != 5 || !gjson.Get(a.Body, "keys_truncated").Bool() {
		t.Errorf("overview: keys_total %s, keys_truncated %s", gjson.Get(a.Body, "keys_total"), gjson.Get(a.Body, "keys_truncated"))
	}
	d := g.get("/dashboard/data", "Authorization", "Bearer k-admin")
	if got := names(d.Body, "tenants.#.tenant"); got != "zz,cc" {
		t.Errorf("dashboard tenants %q, want zz,cc", got)
	}
	if gjson.Get(d.Body, "tenants_total").Int() != 5 || !gjson.Get(d.Body, "tenants_truncated").Bool() {
		t.Errorf("dashboard: tenants_total %s, tenants_truncated %s", gjson.Get(d.Body, "tenants_total"), gjson.Get(d.Body, "tenants_truncated"))
	}
	bin := chromiumBin(t)
	for page, want := range map[string]string{"/admin": "showing 2 of 5 tenants", "/dashboard": "showing 2 of 5 tenants"} {
		if dom := chromiumDOM(t, bin, g.URL+page+"#token=k-admin"); !strings.Contains(dom, want) || !strings.Contains(dom, `data-tenant="zz"`) {
			t.Errorf("%s: the page does not show %q with zz", page, want)
		}
	}
}
