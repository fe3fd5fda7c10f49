package server

import (
	"context"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"switchboard/internal/alerts"
	"switchboard/internal/config"
)

const tagsYAML = `providers:
  a: {type: mock, mock: {tokens: 3}}
models:
  - name: m
    providers: [{provider: a}]
auth:
  keys:
    k-acme: {tenant: acme}
    k-free: {tenant: free}
    k-admin: {tenant: ops, role: admin}
tags:
  from_metadata: true
  metric_keys: [team]
  tenants:
    acme: {allowed: [feature], required: [team]}
`

// TestTagsRoundTrip: tags sent by header (and, with from_metadata, in the
// body's metadata) reach the usage log, where the admin API filters and
// groups by them, and the tag metric; a tenant's rules refuse a request
// missing a required tag or carrying one not allowed, naming it, in the
// client's protocol.
func TestTagsRoundTrip(t *testing.T) {
	g, _, ul := usageGateway(t, tagsYAML)
	acme := func(h ...string) []string { return append([]string{"Authorization", "Bearer k-acme"}, h...) }
	for i, req := range []struct {
		body    string
		headers []string
	}{
		{chatBody, acme("X-Switchboard-Tags", "team=search, feature=autocomplete")},
		{chatBody, acme("X-Switchboard-Tags", "team=search")},
		{`{"model":"m","metadata":{"team":"ads"},"messages":[{"role":"user","content":"hi"}]}`, acme()},
		{chatBody, []string{"Authorization", "Bearer k-free", "X-Switchboard-Tags", "customer=x"}},
	} {
		if a := g.post("/v1/chat/completions", req.body, req.headers...); a.Status != 200 {
			t.Fatalf("request %d: %d %s", i, a.Status, a.Body)
		}
	}
	refusals := []struct {
		path, body string
		headers    []string
		want       string
	}{
		{"/v1/chat/completions", chatBody, acme(), `tag \"team\" is required`},
		{"/v1/chat/completions", chatBody, acme("X-Switchboard-Tags", "team=a,customer=c"), `tag \"customer\" is not allowed`},
		{"/v1/chat/completions", chatBody, acme("X-Switchboard-Tags", "team=a b=c"), `invalid value`},
		{"/v1/chat/completions", `{"model":"m","metadata":{"team":"x"},"messages":[]}`, acme("X-Switchboard-Tags", "team=y"), `given twice`},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, acme("Anthropic-Version", "2023-06-01"), `tag \"team\" is required`},
	}
	for _, r := range refusals {
		a := g.post(r.path, r.body, r.headers...)
		code := gjson.Get(a.Body, "error.code").String()
		if r.path == "/v1/messages" {
			code = gjson.Get(a.Body, "error.type").String()
		}
		if a.Status != 400 || !strings.Contains(a.Body, r.want) || (code != "invalid_tags" && code != "invalid_request_error") {
			t.Errorf("%s %v: %d %s, want 400 naming %s", r.path, r.headers, a.Status, a.Body, r.want)
		}
	}
	waitRows(t, ul, int64(4+len(refusals)))
	admin := []string{"Authorization", "Bearer k-admin"}
	a := g.get("/admin/v1/usage?group_by=tag:team&tenant=acme&status=200", admin...)
	byTeam := map[string]int64{}
	for _, grp := range gjson.Get(a.Body, "data").Array() {
		byTeam[grp.Get("tag:team").String()] = grp.Get("requests").Int()
	}
	if a.Status != 200 || len(byTeam) != 2 || byTeam["search"] != 2 || byTeam["ads"] != 1 {
		t.Fatalf("by team: %d %s", a.Status, a.Body)
	}
	a = g.get("/admin/v1/requests?tag=team:search,feature:autocomplete", admin...)
	rows := gjson.Get(a.Body, "data").Array()
	if a.Status != 200 || len(rows) != 1 || rows[0].Get("tags.feature").String() != "autocomplete" || rows[0].Get("tenant").String() != "acme" {
		t.Fatalf("tag filter: %d %s", a.Status, a.Body)
	}
	m := g.get("/metrics", admin...)
	if !strings.Contains(m.Body, `switchboard_tag_requests_total{tag="team",value="search"} 2`) ||
		!strings.Contains(m.Body, `switchboard_tag_requests_total{tag="team",value="ads"} 1`) || strings.Contains(m.Body, `tag="customer"`) {
		t.Fatalf("tag metric:\n%s", grepLines(m.Body, "switchboard_tag_"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAdminPageTagsAndAlertsInChromium: /admin shows cost by the first
// configured tag key and the latest alerts from the audit log.
func TestAdminPageTagsAndAlertsInChromium(t *testing.T) {
	bin := chromiumBin(t)
	g, _, ul := usageGateway(t, tagsYAML)
	for _, team := range []string{"search", "search", "ads"} {
		if a := g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer k-acme", "X-Switchboard-Tags", "team="+team); a.Status != 200 {
			t.Fatalf("%d %s", a.Status, a.Body)
		}
	}
	waitRows(t, ul, 3)
	g.RecordAlert(context.Background(), alerts.Event{ID: "alert_1", Type: config.AlertBudget, Tenant: "acme", ThresholdPct: 80,
		Message: "tenant acme has used 81.0% of its budget"}, true, 1, "")
	dom := chromiumDOM(t, bin, g.URL+"/admin#token=k-admin")
	for _, want := range []string{`data-tag-value="search"`, `data-tag-value="ads"`, "tenant:acme", "has used 81.0% of its budget", "budget.threshold"} {
		if !strings.Contains(dom, want) {
			t.Errorf("DOM lacks %s", want)
		}
	}
}
