package server

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestRolesSeeWhatTheyMay: an admin key sees providers, traffic and every
// tenant's spend; a tenant key sees the models it may call and its own
// usage, never a provider name; /metrics needs metrics_token or an admin
// key as soon as any auth is configured.
func TestRolesSeeWhatTheyMay(t *testing.T) {
	g := startGateway(t, pricedYAML(`auth:
  keys:
    sk-ops: {tenant: ops, role: admin}
    sk-acme: {tenant: acme, budget_usd: 2}
    sk-beta: {tenant: beta, role: tenant, budget_usd: 3}
`))
	if a := g.post("/v1/chat/completions", chatBody, "x-api-key", "sk-acme"); a.Status != 200 {
		t.Fatalf("chat: %d %s", a.Status, a.Body)
	}
	admin := []string{"Authorization", "Bearer sk-ops"}
	acme := []string{"Authorization", "Bearer sk-acme"}

	tests := []struct {
		path        string
		key         []string
		status      int
		has, hasNot []string
	}{
		{"/v1/health/detail", admin, 200, []string{`"providers"`, `"p"`, `"request_count"`}, nil},
		{"/v1/health/detail", acme, 200, []string{`"models":["m"]`, `"status":"ok"`}, []string{`"p"`, "providers", "request_count"}},
		{"/v1/models/m", admin, 200, []string{`"provider":"p"`, `"model":"priced"`}, nil},
		{"/v1/models/m", acme, 200, []string{`"id":"m"`}, []string{`"p"`, "priced", "providers"}},
		{"/dashboard/data", admin, 200, []string{`"role":"admin"`, `"name":"p"`, `"tenant":"acme"`, `"tenant":"beta"`, `"budget_usd":2`}, nil},
		{"/dashboard/data", acme, 200, []string{`"role":"tenant"`, `"name":"m"`, `"tenant":"acme"`, `"budget_usd":2`},
			[]string{`"p"`, "priced", `"beta"`, `"ops"`}},
		{"/metrics", nil, 401, nil, []string{"switchboard_"}},
		{"/metrics", acme, 403, []string{"admin"}, []string{"switchboard_"}},
		{"/metrics", admin, 200, []string{"switchboard_requests_total"}, nil},
	}
	for _, tt := range tests {
		a := g.get(tt.path, tt.key...)
		who := "none"
		if tt.key != nil {
			who = tt.key[1]
		}
		if a.Status != tt.status {
			t.Errorf("%s as %s: status %d, want %d: %.300s", tt.path, who, a.Status, tt.status, a.Body)
			continue
		}
		for _, s := range tt.has {
			if !strings.Contains(a.Body, s) {
				t.Errorf("%s as %s lacks %s: %.600s", tt.path, who, s, a.Body)
			}
		}
		for _, s := range tt.hasNot {
			if strings.Contains(a.Body, s) {
				t.Errorf("%s as %s shows %s: %.600s", tt.path, who, s, a.Body)
			}
		}
	}
	// The tenant's dashboard usage is its own spend, not another's.
	if d := g.get("/dashboard/data", acme...); gjson.Get(d.Body, "usage.spend.settled_usd").Float() <= 0 {
		t.Errorf("tenant dashboard usage lacks its spend: %s", d.Body)
	}
}

// TestMetricsTokenAndAuthToken: metrics_token alone still opens /metrics;
// auth.token (the operator's single shared key) is an admin; without any
// auth /metrics is open.
func TestMetricsTokenAndAuthToken(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a")+"auth: {token: t0k, metrics_token: scrape}\n")
	for key, want := range map[string]int{"": 401, "Bearer scrape": 200, "Bearer t0k": 200, "Bearer nope": 401} {
		if a := g.get("/metrics", "Authorization", key); a.Status != want {
			t.Errorf("/metrics with %q: %d, want %d", key, a.Status, want)
		}
	}
	if d := g.get("/v1/health/detail", "Authorization", "Bearer t0k"); !strings.Contains(d.Body, `"a"`) {
		t.Errorf("auth.token does not see providers: %s", d.Body)
	}
	open := startGateway(t, mockYAML("m", "a"))
	if a := open.get("/metrics"); a.Status != 200 {
		t.Errorf("/metrics without auth: %d", a.Status)
	}
}
