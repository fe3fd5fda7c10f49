package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchboard/internal/inference"
	"switchboard/internal/provider/mock"
)

// servedYAML: small falls back to big on error; both priced, behind keys.
const servedYAML = `providers:
  s1: {type: mock, mock: {tokens: 3}}
  b1: {type: mock, mock: {tokens: 3}}
models:
  - name: small
    providers: [{provider: s1, model: small-v1}]
    fallbacks: {models: [big], on: [error]}
  - name: big
    providers: [{provider: b1, model: big-v1}]
retries: {max_attempts: 1, max_rounds: 1}
auth:
  keys:
    k-acme: {tenant: acme}
    k-admin: {tenant: ops, role: admin}
`

// TestUsageRowServedModel: through the real server, a request small's
// provider fails is served by big: its usage row says model=small,
// served_model=big (JSON, CSV, the served_model filter and group), and
// a request small serves itself says served_model=small.
func TestUsageRowServedModel(t *testing.T) {
	g, _, ul := usageGateway(t, servedYAML)
	acme := []string{"Authorization", "Bearer k-acme"}
	g.mock("s1").Script(mock.Fault{Status: http.StatusServiceUnavailable})
	if a := g.post("/v1/chat/completions", smallBody, acme...); a.Status != 200 || a.Header.Get(inference.FallbackModelHeader) != "big" {
		t.Fatalf("the fallback: %d %q %s", a.Status, a.Header.Get(inference.FallbackModelHeader), a.Body)
	}
	if a := g.post("/v1/chat/completions", smallBody, acme...); a.Status != 200 || a.Header.Get(inference.FallbackModelHeader) != "" {
		t.Fatalf("small itself: %d %q %s", a.Status, a.Header.Get(inference.FallbackModelHeader), a.Body)
	}
	waitRows(t, ul, 2)
	admin := []string{"Authorization", "Bearer k-admin"}

	a := g.get("/admin/v1/requests", admin...)
	rows := gjson.Get(a.Body, "data").Array()
	if a.Status != 200 || len(rows) != 2 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	type cols struct{ model, served, provider, providerModel string }
	want := []cols{{"small", "small", "s1", "small-v1"}, {"small", "big", "b1", "big-v1"}} // newest first
	for i, r := range rows {
		got := cols{r.Get("model").String(), r.Get("served_model").String(), r.Get("provider").String(), r.Get("provider_model").String()}
		if got != want[i] {
			t.Errorf("row %d: model, served_model, provider, provider_model = %v, want %v", i, got, want[i])
		}
	}

	a = g.get("/admin/v1/requests?served_model=big", admin...)
	if rows := gjson.Get(a.Body, "data").Array(); a.Status != 200 || len(rows) != 1 || rows[0].Get("provider").String() != "b1" {
		t.Fatalf("served_model=big: %d %s", a.Status, a.Body)
	}
	a = g.get("/admin/v1/requests?format=csv", admin...)
	lines := strings.Split(strings.TrimSpace(a.Body), "\n")
	if a.Status != 200 || len(lines) != 3 || !strings.HasSuffix(lines[0], ",unpriced,served_model,tags") ||
		!strings.HasSuffix(lines[1], ",small,") || !strings.HasSuffix(lines[2], ",big,") {
		t.Fatalf("csv: %d\n%s", a.Status, a.Body)
	}
	a = g.get("/admin/v1/requests?format=jsonl&served_model=big", admin...)
	if a.Status != 200 || strings.Count(a.Body, "\n") != 1 || gjson.Get(a.Body, "served_model").String() != "big" {
		t.Fatalf("jsonl: %d %s", a.Status, a.Body)
	}
	a = g.get("/admin/v1/usage?group_by=model,served_model", admin...)
	if a.Status != 200 || gjson.Get(a.Body, "data.#").Int() != 2 ||
		gjson.Get(a.Body, `data.#(served_model=="big").model`).String() != "small" ||
		gjson.Get(a.Body, `data.#(served_model=="big").requests`).Int() != 1 {
		t.Fatalf("group_by served_model: %d %s", a.Status, a.Body)
	}
	a = g.get("/admin/v1/usage?group_by=served_model&served_model=small", admin...)
	if a.Status != 200 || gjson.Get(a.Body, "total.requests").Int() != 1 {
		t.Fatalf("served_model filter on sums: %d %s", a.Status, a.Body)
	}
	a = g.get("/admin/v1/usage?group_by=colour", admin...)
	if a.Status != 400 || !strings.Contains(gjson.Get(a.Body, "error.message").String(), "served_model") {
		t.Fatalf("a bad group_by does not list served_model: %d %s", a.Status, a.Body)
	}
}

// fellBackGateway: small falls back to mid, then big; two requests fell
// back (the first through mid to big, the second to mid), a third was
// served by small.
func fellBackGateway(t *testing.T) *gateway {
	g := startGateway(t, `providers:
  s1: {type: mock, mock: {tokens: 3}}
  m1: {type: mock, mock: {tokens: 3}}
  b1: {type: mock, mock: {tokens: 3}}
models:
  - name: small
    providers: [{provider: s1}]
    fallbacks: {models: [mid, big], on: [error]}
  - name: mid
    providers: [{provider: m1}]
  - name: big
    providers: [{provider: b1}]
retries: {max_attempts: 1, max_rounds: 1}
auth:
  keys:
    k-acme: {tenant: acme}
    k-admin: {tenant: ops, role: admin}
`)
	g.mock("s1").Script(mock.Fault{Status: 503}, mock.Fault{Status: 503})
	g.mock("m1").Script(mock.Fault{Status: 503})
	for i, want := range []string{"big", "mid", ""} {
		if a := g.post("/v1/chat/completions", smallBody, "Authorization", "Bearer k-acme"); a.Status != 200 || a.Header.Get(inference.FallbackModelHeader) != want {
			t.Fatalf("request %d: %d served by %q, want %q: %s", i, a.Status, a.Header.Get(inference.FallbackModelHeader), want, a.Body)
		}
	}
	return g
}

// TestDashboardShowsFallbacks: the admin's dashboard data lists a
// model's fallbacks and how many requests it handed to them (once each,
// however many fallbacks a request tried; the metric counts each hop); a
// tenant sees neither.
func TestDashboardShowsFallbacks(t *testing.T) {
	g := fellBackGateway(t)
	d := g.get("/dashboard/data", "Authorization", "Bearer k-admin")
	small := gjson.Get(d.Body, `models.#(name=="small")`)
	if d.Status != 200 || small.Get("fallbacks").String() != `["mid","big"]` || small.Get("fallback_on").String() != `["error"]` ||
		small.Get("fell_back").Int() != 2 {
		t.Fatalf("admin dashboard small: %d %s", d.Status, small.Raw)
	}
	// mid failed once but has no fallbacks of its own: small's loop went
	// on to big, which counts for small only.
	if mid := gjson.Get(d.Body, `models.#(name=="mid")`); !mid.Exists() || mid.Get("fallbacks").Exists() || mid.Get("fell_back").Int() != 0 {
		t.Fatalf("admin dashboard mid: %s", mid.Raw)
	}
	d = g.get("/dashboard/data", "Authorization", "Bearer k-acme")
	if d.Status != 200 || strings.Contains(d.Body, "fallback") || strings.Contains(d.Body, "fell_back") {
		t.Fatalf("a tenant's dashboard shows fallbacks: %d %s", d.Status, d.Body)
	}
}

// TestDashboardFallbacksInChromium: the page shows them to an admin.
func TestDashboardFallbacksInChromium(t *testing.T) {
	bin := chromiumBin(t)
	g := fellBackGateway(t)
	dom := chromiumDOM(t, bin, g.URL+"/dashboard#token=k-admin")
	if want := "fallbacks: mid, big (on error), 2 fell back"; !strings.Contains(dom, want) {
		t.Errorf("DOM lacks %q:\n%.3000s", want, dom)
	}
	_, mid, _ := strings.Cut(dom, `data-model="mid"`)
	if mid, _, _ = strings.Cut(mid, "</section>"); mid == "" || strings.Contains(mid, "fell back") {
		t.Errorf("mid, without fallbacks, shows a fallback count: %q", mid)
	}
}
