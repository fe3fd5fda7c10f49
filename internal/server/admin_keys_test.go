package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/clock"
	"switchboard/internal/config"
)

const adminYAML = `providers:
  a: {type: mock, mock: {tokens: 5}}
models:
  - name: m
    providers: [{provider: a}]
  - name: m2
    providers: [{provider: a}]
auth:
  keys:
    sk-ops: {tenant: ops, role: admin}
    sk-acme: {tenant: acme, rpm: 100}
`

// adminCall sends an admin request as sk-ops.
func (g *gateway) adminCall(method, path, body string) answer {
	g.t.Helper()
	req, _ := http.NewRequest(method, g.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-ops")
	req.Header.Set("Content-Type", "application/json")
	return g.do(req)
}

// must fails the test unless a has status; it returns a.
func (g *gateway) must(a answer, status int) answer {
	g.t.Helper()
	if a.Status != status {
		g.t.Fatalf("status %d, want %d: %s", a.Status, status, a.Body)
	}
	return a
}

func chatAs(g *gateway, key, model string) answer {
	g.t.Helper()
	return g.post("/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+key)
}

// TestAdminKeyLifecycle drives an issued key through the real server:
// create a tenant and a key limited to one model, use it, widen it, let it
// expire, rotate it with a grace, revoke it; every change is an audit row
// naming the admin and never the secret.
func TestAdminKeyLifecycle(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	g := startGatewayClock(t, adminYAML, clk)
	must := g.must
	must(g.adminCall("POST", "/admin/v1/tenants", `{"name":"team","rpm":100,"budget_window_secs":3600}`), 201)
	a := must(g.adminCall("POST", "/admin/v1/keys", `{"name":"ci","tenant":"team","models":["m"]}`), 201)
	id, secret := gjson.Get(a.Body, "id").String(), gjson.Get(a.Body, "secret").String()
	if !strings.HasPrefix(id, "key-") || !strings.HasPrefix(secret, "sk-sb-") || a.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create answered %s (%v)", a.Body, a.Header)
	}

	// Used at once; limited to m: m2 is "not found", and /v1/models lists m only.
	must(chatAs(g, secret, "m"), 200)
	if a := chatAs(g, secret, "m2"); a.Status != 404 || gjson.Get(a.Body, "error.code").String() != "model_not_found" {
		t.Errorf("m2 with a key limited to m: %d %s", a.Status, a.Body)
	}
	if a := g.get("/v1/models", "Authorization", "Bearer "+secret); gjson.Get(a.Body, "data.#.id").String() != `["m"]` {
		t.Errorf("models of a limited key: %s", a.Body)
	}
	if a := g.get("/v1/models/m2", "Authorization", "Bearer "+secret); a.Status != 404 {
		t.Errorf("/v1/models/m2 of a limited key: %d", a.Status)
	}
	if a := g.get("/v1/health/detail", "Authorization", "Bearer "+secret); gjson.Get(a.Body, "models").String() != `["m"]` {
		t.Errorf("health detail of a limited key: %s", a.Body)
	}
	if a := g.get("/dashboard/data", "Authorization", "Bearer "+secret); gjson.Get(a.Body, "models.#.name").String() != `["m"]` {
		t.Errorf("dashboard of a limited key: %s", a.Body)
	}
	must(chatAs(g, "sk-acme", "m2"), 200) // other keys are not limited

	// Listed and shown without the secret or its digest.
	for _, a := range []answer{must(g.adminCall("GET", "/admin/v1/keys", ""), 200), must(g.adminCall("GET", "/admin/v1/keys/"+id, ""), 200)} {
		if strings.Contains(a.Body, secret) || strings.Contains(a.Body, sha256hex(secret)) || strings.Contains(a.Body, "digest") {
			t.Errorf("a listing shows the secret: %s", a.Body)
		}
	}
	if a := g.adminCall("GET", "/admin/v1/keys/"+id, ""); gjson.Get(a.Body, "tenant").String() != "team" || gjson.Get(a.Body, "read_only").Bool() {
		t.Errorf("show: %s", a.Body)
	}

	// Widened to every model, and given an expiry.
	must(g.adminCall("PATCH", "/admin/v1/keys/"+id, `{"models":null,"expires_at":"2030-01-01T01:00:00Z"}`), 200)
	must(chatAs(g, secret, "m2"), 200)
	clk.Advance(time.Hour)
	if a := chatAs(g, secret, "m"); a.Status != 401 || gjson.Get(a.Body, "error.code").String() != "key_expired" ||
		!strings.Contains(a.Body, "2030-01-01T01:00:00Z") {
		t.Errorf("expired key: %d %s", a.Status, a.Body)
	}
	// An expired key's other fields can still change (it stays expired);
	// setting a past expiry cannot.
	must(g.adminCall("PATCH", "/admin/v1/keys/"+id, `{"tier":2}`), 200)
	if a := chatAs(g, secret, "m"); a.Status != 401 {
		t.Errorf("an expired key after a tier change: %d %s", a.Status, a.Body)
	}
	if a := g.adminCall("PATCH", "/admin/v1/keys/"+id, `{"expires_at":"2030-01-01T00:30:00Z"}`); a.Status != 400 ||
		gjson.Get(a.Body, "error.param").String() != "expires_at" {
		t.Errorf("a past expiry: %d %s", a.Status, a.Body)
	}
	// Rotating an expired key would hand out a secret that does not work
	// either: 409, saying to set a new expiry first; nothing changed.
	if a := g.adminCall("POST", "/admin/v1/keys/"+id+"/rotate", `{}`); a.Status != 409 || gjson.Get(a.Body, "error.code").String() != "expired" ||
		gjson.Get(a.Body, "error.param").String() != "expires_at" || !strings.Contains(a.Body, "set a new expires_at first") ||
		gjson.Get(a.Body, "secret").Exists() {
		t.Errorf("rotate of an expired key: %d %s", a.Status, a.Body)
	}
	must(g.adminCall("PATCH", "/admin/v1/keys/"+id, `{"expires_at":null}`), 200)
	must(chatAs(g, secret, "m"), 200)

	// Rotated with a grace of 60 s: both secrets work, then only the new.
	a = must(g.adminCall("POST", "/admin/v1/keys/"+id+"/rotate", `{"grace_seconds":60}`), 200)
	fresh := gjson.Get(a.Body, "secret").String()
	if fresh == "" || fresh == secret {
		t.Fatalf("rotate: %s", a.Body)
	}
	must(chatAs(g, fresh, "m"), 200)
	must(chatAs(g, secret, "m"), 200)
	clk.Advance(61 * time.Second)
	must(chatAs(g, secret, "m"), 401)
	must(chatAs(g, fresh, "m"), 200)

	// Revoked: 401 at once, shown as revoked, and no longer changeable.
	must(g.adminCall("DELETE", "/admin/v1/keys/"+id, ""), 200)
	if a := chatAs(g, fresh, "m"); a.Status != 401 || gjson.Get(a.Body, "error.code").String() != "invalid_api_key" {
		t.Errorf("revoked key: %d %s", a.Status, a.Body)
	}
	if a := g.adminCall("GET", "/admin/v1/keys/"+id, ""); !gjson.Get(a.Body, "revoked").Bool() {
		t.Errorf("revoked key shown as %s", a.Body)
	}
	must(g.adminCall("PATCH", "/admin/v1/keys/"+id, `{"tier":2}`), 409)
	if a := g.adminCall("GET", "/admin/v1/keys?revoked=false", ""); strings.Contains(a.Body, id) {
		t.Errorf("revoked=false lists the revoked key: %s", a.Body)
	}

	// The audit log: one row per change, by the admin key's id, no secret.
	a = must(g.adminCall("GET", "/admin/v1/audit", ""), 200)
	got := gjson.Get(a.Body, "data.#.action").String()
	if want := `["tenant.create","key.create","key.update","key.update","key.update","key.rotate","key.revoke"]`; got != want {
		t.Errorf("audit actions %s, want %s", got, want)
	}
	var ops string
	for _, k := range gjson.Get(g.adminCall("GET", "/admin/v1/keys", "").Body, "data").Array() {
		if k.Get("tenant").String() == "ops" {
			ops = k.Get("id").String()
		}
	}
	if actors := gjson.Get(a.Body, "data.#.actor").Array(); len(actors) == 0 || actors[0].String() != ops {
		t.Errorf("audit actor %v, want %s", actors, ops)
	}
	for _, s := range []string{secret, fresh, sha256hex(secret), sha256hex(fresh)} {
		if strings.Contains(a.Body, s) {
			t.Errorf("the audit log holds a secret: %s", a.Body)
		}
	}
	if gjson.Get(a.Body, "data.1.fields.models").String() != `["m"]` || gjson.Get(a.Body, "data.1.target").String() != id {
		t.Errorf("key.create row: %s", gjson.Get(a.Body, "data.1").Raw)
	}
	// Paged.
	if a := g.adminCall("GET", "/admin/v1/audit?after=2&limit=2", ""); gjson.Get(a.Body, "data.#.seq").String() != "[3,4]" ||
		!gjson.Get(a.Body, "has_more").Bool() {
		t.Errorf("audit page: %s", a.Body)
	}

	// The log has each change, and no secret.
	if logs := g.logs.String(); !strings.Contains(logs, `msg="admin change"`) || !strings.Contains(logs, "action=key.rotate") ||
		strings.Contains(logs, secret) || strings.Contains(logs, fresh) {
		t.Errorf("admin changes in the log:\n%s", logs)
	}

	// A tenant with a live key cannot go; without, it can.
	must(g.adminCall("POST", "/admin/v1/keys", `{"name":"ci2","tenant":"team"}`), 201)
	must(g.adminCall("DELETE", "/admin/v1/tenants/team", ""), 409)
}

// TestAdminTenantLimitsApply: a tenant's limits, changed through the API,
// govern its keys at once (rpm 1: the second request is refused; raised:
// admitted again).
func TestAdminTenantLimitsApply(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	g := startGatewayClock(t, adminYAML, clk)
	if a := g.adminCall("POST", "/admin/v1/tenants", `{"name":"slow","rpm":1}`); a.Status != 201 {
		t.Fatal(a.Body)
	}
	a := g.adminCall("POST", "/admin/v1/keys", `{"name":"k","tenant":"slow"}`)
	secret := gjson.Get(a.Body, "secret").String()
	if a := chatAs(g, secret, "m"); a.Status != 200 {
		t.Fatalf("first: %d %s", a.Status, a.Body)
	}
	if a := chatAs(g, secret, "m"); a.Status != 429 {
		t.Fatalf("second at rpm 1: %d %s", a.Status, a.Body)
	}
	if a := g.adminCall("PATCH", "/admin/v1/tenants/slow", `{"rpm":null}`); a.Status != 200 || gjson.Get(a.Body, "rpm").Raw != "null" {
		t.Fatalf("patch: %d %s", a.Status, a.Body)
	}
	if a := chatAs(g, secret, "m"); a.Status != 200 {
		t.Fatalf("after lifting rpm: %d %s", a.Status, a.Body)
	}
	// A config reload keeps the issued keys and tenants.
	cfg, err := config.Parse([]byte(adminYAML), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g.Apply(cfg)
	if a := chatAs(g, secret, "m"); a.Status != 200 {
		t.Fatalf("after a reload: %d %s", a.Status, a.Body)
	}
	// An issued key of a config tenant shares that tenant's limits.
	a = g.adminCall("POST", "/admin/v1/keys", `{"name":"acme-2","tenant":"acme","role":"tenant","tier":3}`)
	if a.Status != 201 {
		t.Fatal(a.Body)
	}
	if u := g.get("/v1/usage", "Authorization", "Bearer "+gjson.Get(a.Body, "secret").String()); gjson.Get(u.Body, "limits.rpm.limit").Int() != 100 {
		t.Errorf("usage of an issued acme key: %s", u.Body)
	}
}

// TestAdminValidation: every field is checked with the config's ranges;
// the answer is 400 naming the field (param), 409 for duplicates and for
// what the config owns.
func TestAdminValidation(t *testing.T) {
	g := startGateway(t, adminYAML)
	if a := g.adminCall("POST", "/admin/v1/tenants", `{"name":"team"}`); a.Status != 201 {
		t.Fatal(a.Body)
	}
	if a := g.adminCall("POST", "/admin/v1/keys", `{"name":"taken","tenant":"team"}`); a.Status != 201 {
		t.Fatal(a.Body)
	}
	var cfgKey string
	for _, k := range gjson.Get(g.adminCall("GET", "/admin/v1/keys", "").Body, "data").Array() {
		if k.Get("tenant").String() == "acme" {
			cfgKey = k.Get("id").String()
		}
	}
	tests := []struct {
		method, path, body string
		status             int
		code, param        string
	}{
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","tier":1001}`, 400, "invalid_value", "tier"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","tier":"high"}`, 400, "invalid_value", "tier"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","role":"root"}`, 400, "invalid_value", "role"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","rpm":-1}`, 400, "invalid_value", "rpm"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","tpm":1e13}`, 400, "invalid_value", "tpm"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","rpm":"5"}`, 400, "invalid_value", "rpm"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","daily_requests":2000000000}`, 400, "invalid_value", "daily_requests"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","budget_usd":-1}`, 400, "invalid_value", "budget_usd"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","budget_window_secs":10}`, 400, "invalid_value", "budget_window_secs"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","budget_allow_unpriced":true}`, 400, "unknown_field", "budget_allow_unpriced"},
		{"POST", "/admin/v1/keys", `{"name":"k"}`, 400, "invalid_value", "tenant"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"ghost"}`, 400, "invalid_value", "tenant"},
		{"POST", "/admin/v1/keys", `{"tenant":"team"}`, 400, "invalid_value", "name"},
		{"POST", "/admin/v1/keys", `{"name":"a\u0007b","tenant":"team"}`, 400, "invalid_value", "name"},
		{"POST", "/admin/v1/keys", `{"name":"ci\u202egnp.exe","tenant":"team"}`, 400, "invalid_value", "name"},
		{"POST", "/admin/v1/tenants", `{"name":"acme\u2066x"}`, 400, "invalid_value", "name"},
		{"POST", "/admin/v1/keys", `{"name":"` + strings.Repeat("n", 129) + `","tenant":"team"}`, 400, "invalid_value", "name"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","expires_at":"2001-01-01T00:00:00Z"}`, 400, "invalid_value", "expires_at"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","expires_at":"tomorrow"}`, 400, "invalid_value", "expires_at"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","expires_at":5}`, 400, "invalid_value", "expires_at"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","models":["nope"]}`, 400, "invalid_value", "models[0]"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","models":[]}`, 400, "invalid_value", "models"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","models":"m"}`, 400, "invalid_value", "models"},
		{"POST", "/admin/v1/keys", `{"name":"taken","tenant":"team"}`, 409, "duplicate_name", "name"},
		{"POST", "/admin/v1/keys", `[`, 400, "invalid_json", ""},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team","name":"taken"}`, 400, "invalid_json", "name"},
		{"PATCH", "/admin/v1/tenants/team", `{"rpm":5,"rpm":null}`, 400, "invalid_json", "rpm"},
		{"POST", "/admin/v1/keys", `{"name":"k","tenant":"team"} {}`, 400, "invalid_json", ""},
		{"POST", "/admin/v1/tenants", `{"name":"t","rpm":-1}`, 400, "invalid_value", "rpm"},
		{"POST", "/admin/v1/tenants", `{"name":"t","tpm":1e13}`, 400, "invalid_value", "tpm"},
		{"POST", "/admin/v1/tenants", `{"name":"t","daily_requests":2000000000}`, 400, "invalid_value", "daily_requests"},
		{"POST", "/admin/v1/tenants", `{"name":"t","budget_usd":1e10}`, 400, "invalid_value", "budget_usd"},
		{"POST", "/admin/v1/tenants", `{"name":"t","budget_usd":-1}`, 400, "invalid_value", "budget_usd"},
		{"POST", "/admin/v1/tenants", `{"name":"t","budget_window_secs":10}`, 400, "invalid_value", "budget_window_secs"},
		{"POST", "/admin/v1/tenants", `{"name":"t","budget_allow_unpriced":"yes"}`, 400, "invalid_value", "budget_allow_unpriced"},
		{"POST", "/admin/v1/tenants", `{"name":""}`, 400, "invalid_value", "name"},
		{"POST", "/admin/v1/tenants", `{"name":"t","tier":1}`, 400, "unknown_field", "tier"},
		{"POST", "/admin/v1/tenants", `{"name":"acme"}`, 409, "duplicate_name", "name"},
		{"POST", "/admin/v1/tenants", `{"name":"team"}`, 409, "duplicate_name", "name"},
		{"PATCH", "/admin/v1/tenants/team", `{"name":"other"}`, 400, "invalid_value", "name"},
		{"PATCH", "/admin/v1/tenants/team", `{}`, 400, "invalid_request", ""},
		{"PATCH", "/admin/v1/tenants/acme", `{"rpm":1}`, 409, "read_only", ""},
		{"DELETE", "/admin/v1/tenants/acme", ``, 409, "read_only", ""},
		{"PATCH", "/admin/v1/keys/" + cfgKey, `{"tier":1}`, 409, "read_only", ""},
		{"DELETE", "/admin/v1/keys/" + cfgKey, ``, 409, "read_only", ""},
		{"POST", "/admin/v1/keys/" + cfgKey + "/rotate", ``, 409, "read_only", ""},
		{"PATCH", "/admin/v1/keys/key-000000000000", `{"tier":1}`, 404, "not_found", ""},
		{"POST", "/admin/v1/keys/key-000000000000/rotate", `{"grace_seconds":86401}`, 400, "invalid_value", "grace_seconds"},
		{"POST", "/admin/v1/keys/key-000000000000/explode", ``, 404, "not_found", ""},
		{"PUT", "/admin/v1/keys", `{}`, 405, "method_not_allowed", ""},
		{"GET", "/admin/v1/audit?limit=0", ``, 400, "invalid_value", "limit"},
		{"GET", "/admin/v1/audit?after=x", ``, 400, "invalid_value", "after"},
	}
	for _, tt := range tests {
		a := g.adminCall(tt.method, tt.path, tt.body)
		if a.Status != tt.status || gjson.Get(a.Body, "error.code").String() != tt.code || gjson.Get(a.Body, "error.param").String() != tt.param {
			t.Errorf("%s %s %.60s: %d %s, want %d %s param %q", tt.method, tt.path, tt.body, a.Status, a.Body, tt.status, tt.code, tt.param)
		}
	}
	if a := g.adminCall("PATCH", "/admin/v1/keys/"+gjson.Get(g.adminCall("GET", "/admin/v1/keys", "").Body, `data.#(name=="taken").id`).String(),
		`{"budget_allow_unpriced":true}`); !strings.Contains(a.Body, "PATCH /admin/v1/tenants/") {
		t.Errorf("budget_allow_unpriced on a key does not point to the tenant: %s", a.Body)
	}
	// The admin bound is its own, not limits.max_request_body.
	if a := g.adminCall("POST", "/admin/v1/tenants", `{"name":"`+strings.Repeat("n", 70<<10)+`"}`); a.Status != 413 ||
		!strings.Contains(a.Body, "admin request body is limited to 65536 bytes") {
		t.Errorf("a 70 KiB admin body: %d %s", a.Status, a.Body)
	}
	// Nothing refused was written: two changes so far.
	if a := g.adminCall("GET", "/admin/v1/audit", ""); gjson.Get(a.Body, "data.#").Int() != 2 {
		t.Errorf("audit after refusals: %s", a.Body)
	}
	// Letters of any script and emoji (a zero-width joiner included) are names.
	if a := g.adminCall("POST", "/admin/v1/tenants", `{"name":"équipe 日本 👩‍💻"}`); a.Status != 201 {
		t.Errorf("a unicode tenant name: %d %s", a.Status, a.Body)
	}
}

// TestAdminKeyPages: config keys (by id), then issued keys oldest first,
// in pages that count both: limit is the page size whatever the keys file
// holds, and the cursor may name either kind.
func TestAdminKeyPages(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	g := startGatewayClock(t, adminYAML, clk)
	var ids []string
	for i := range 5 {
		a := g.adminCall("POST", "/admin/v1/keys", `{"name":"k`+string(rune('0'+i))+`","tenant":"acme"}`)
		ids = append(ids, gjson.Get(a.Body, "id").String())
		clk.Advance(time.Second)
	}
	// adminYAML has two config keys.
	a := g.adminCall("GET", "/admin/v1/keys?limit=3", "")
	if len(gjson.Get(a.Body, "data").Array()) != 3 || len(gjson.Get(a.Body, `data.#(source=="auth.keys")#.id`).Array()) != 2 ||
		gjson.Get(a.Body, `data.2.id`).String() != ids[0] || gjson.Get(a.Body, "next_after").String() != ids[0] || !gjson.Get(a.Body, "has_more").Bool() {
		t.Fatalf("first page: %s", a.Body)
	}
	// A page that ends on a config key goes on with the next one.
	a = g.adminCall("GET", "/admin/v1/keys?limit=1", "")
	first := gjson.Get(a.Body, "data.0.id").String()
	if len(gjson.Get(a.Body, "data").Array()) != 1 || !strings.HasPrefix(first, "cfg-") || gjson.Get(a.Body, "next_after").String() != first {
		t.Fatalf("a one-key page: %s", a.Body)
	}
	a = g.adminCall("GET", "/admin/v1/keys?limit=2&after="+first, "")
	if got := gjson.Get(a.Body, "data.1.id").String(); len(gjson.Get(a.Body, "data").Array()) != 2 || got != ids[0] ||
		!strings.HasPrefix(gjson.Get(a.Body, "data.0.id").String(), "cfg-") {
		t.Fatalf("the page after a config key: %s", a.Body)
	}
	a = g.adminCall("GET", "/admin/v1/keys?limit=2&after="+ids[0], "")
	if got := gjson.Get(a.Body, "data.#.id").String(); got != `["`+ids[1]+`","`+ids[2]+`"]` {
		t.Fatalf("second page: %s", a.Body)
	}
	a = g.adminCall("GET", "/admin/v1/keys?limit=2&after="+ids[3], "")
	if got := gjson.Get(a.Body, "data.#.id").String(); got != `["`+ids[4]+`"]` || gjson.Get(a.Body, "has_more").Bool() {
		t.Fatalf("last page: %s", a.Body)
	}
	for _, q := range []string{"limit=0", "limit=10001", "after=key-nope"} {
		if a := g.adminCall("GET", "/admin/v1/keys?"+q, ""); a.Status != 400 {
			t.Errorf("%s: %d", q, a.Status)
		}
	}

	// Paging with revoked=false while the key that ended the last page is
	// revoked: the cursor still says where the next page starts.
	a = g.adminCall("GET", "/admin/v1/keys?revoked=false&limit=4", "")
	cursor := gjson.Get(a.Body, "next_after").String()
	if cursor != ids[1] {
		t.Fatalf("first live page: %s", a.Body)
	}
	if a := g.adminCall("POST", "/admin/v1/keys/"+ids[1]+"/revoke", ""); a.Status != 200 {
		t.Fatal(a.Body)
	}
	a = g.adminCall("GET", "/admin/v1/keys?revoked=false&limit=2&after="+cursor, "")
	if got := gjson.Get(a.Body, "data.#.id").String(); a.Status != 200 || got != `["`+ids[2]+`","`+ids[3]+`"]` {
		t.Fatalf("next live page after its cursor was revoked: %d %s", a.Status, a.Body)
	}
	if a := g.adminCall("GET", "/admin/v1/keys?revoked=false", ""); strings.Contains(a.Body, ids[1]) {
		t.Errorf("revoked=false lists a revoked key: %s", a.Body)
	}
}

// TestAdminListParams: a parameter a list route does not take, a repeated
// one, or a revoked= that is neither true nor false is a 400 naming it,
// never silently the default (?revoked=no would list revoked keys).
func TestAdminListParams(t *testing.T) {
	g := startGateway(t, adminYAML)
	tests := []struct{ path, param string }{
		{"/admin/v1/keys?revoked=no", "revoked"},
		{"/admin/v1/keys?revoked=0", "revoked"},
		{"/admin/v1/keys?revoked=", "revoked"},
		{"/admin/v1/keys?limt=5", "limt"},
		{"/admin/v1/keys?limit=1&limit=2", "limit"},
		{"/admin/v1/audit?since=5", "since"},
		{"/admin/v1/audit?after=1&after=2", "after"},
		{"/admin/v1/tenants?limit=5", "limit"},
	}
	for _, tt := range tests {
		a := g.adminCall("GET", tt.path, "")
		if a.Status != 400 || gjson.Get(a.Body, "error.code").String() != "invalid_value" || gjson.Get(a.Body, "error.param").String() != tt.param {
			t.Errorf("GET %s: %d %s, want 400 invalid_value naming %s", tt.path, a.Status, a.Body, tt.param)
		}
	}
	for _, p := range []string{"/admin/v1/keys?revoked=true&limit=5", "/admin/v1/keys?revoked=false", "/admin/v1/audit?after=0&limit=5", "/admin/v1/tenants"} {
		if a := g.adminCall("GET", p, ""); a.Status != 200 {
			t.Errorf("GET %s: %d %s", p, a.Status, a.Body)
		}
	}
}
