package server

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/clock"
)

// TestAdminKeyLimits: an issued key's own rpm is enforced in addition to
// its tenant's, through the real server: the key's third request in a
// minute is a 429 that names the key's limit while another key of the
// tenant is still served; raising the key's limit by PATCH takes effect
// at once; and a key with a looser limit than its tenant's still meets
// the tenant's.
func TestAdminKeyLimits(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	g := startGatewayClock(t, adminYAML, clk)
	must := g.must
	must(g.adminCall("POST", "/admin/v1/tenants", `{"name":"team","rpm":100}`), 201)
	a := must(g.adminCall("POST", "/admin/v1/keys", `{"name":"tight","tenant":"team","rpm":2,"tpm":null}`), 201)
	tight, tightID := gjson.Get(a.Body, "secret").String(), gjson.Get(a.Body, "id").String()
	if gjson.Get(a.Body, "rpm").Int() != 2 || gjson.Get(a.Body, "tpm").Raw != "null" {
		t.Fatalf("create shows %s", a.Body)
	}
	other := gjson.Get(must(g.adminCall("POST", "/admin/v1/keys", `{"name":"other","tenant":"team"}`), 201).Body, "secret").String()

	must(chatAs(g, tight, "m"), 200)
	must(chatAs(g, tight, "m"), 200)
	a = must(chatAs(g, tight, "m"), 429)
	if gjson.Get(a.Body, "error.code").String() != "rate_limit_exceeded" || a.Header.Get("Retry-After") == "" ||
		!strings.Contains(gjson.Get(a.Body, "error.message").String(), "key's limit") {
		t.Errorf("key-level refusal: %v %s", a.Header, a.Body)
	}
	must(chatAs(g, other, "m"), 200) // the tenant (100 rpm) has room

	// Shown and audited.
	if k := g.adminCall("GET", "/admin/v1/keys/"+tightID, ""); gjson.Get(k.Body, "rpm").Int() != 2 {
		t.Errorf("show: %s", k.Body)
	}
	if l := g.adminCall("GET", "/admin/v1/keys", ""); gjson.Get(l.Body, `data.#(id=="`+tightID+`").rpm`).Int() != 2 {
		t.Errorf("list: %s", l.Body)
	}
	a = must(g.adminCall("PATCH", "/admin/v1/keys/"+tightID, `{"rpm":5}`), 200)
	if gjson.Get(a.Body, "rpm").Int() != 5 {
		t.Errorf("patch shows %s", a.Body)
	}
	au := g.adminCall("GET", "/admin/v1/audit", "").Body
	if gjson.Get(au, `data.#(action=="key.update").fields.rpm`).Int() != 5 ||
		gjson.Get(au, `data.#(action=="key.create").fields.rpm`).Int() != 2 {
		t.Errorf("audit: %s", au)
	}
	must(chatAs(g, tight, "m"), 200) // raised: the third of the minute passes

	// A looser key limit does not lift the tenant's.
	must(g.adminCall("PATCH", "/admin/v1/tenants/team", `{"rpm":1}`), 200)
	clk.Advance(10 * time.Minute) // the consumption kept across the change (5 of 1) refills
	must(g.adminCall("PATCH", "/admin/v1/keys/"+tightID, `{"rpm":50}`), 200)
	must(chatAs(g, tight, "m"), 200)
	a = must(chatAs(g, tight, "m"), 429)
	if strings.Contains(gjson.Get(a.Body, "error.message").String(), "key's limit") {
		t.Errorf("the tenant's refusal names the key's limit: %s", a.Body)
	}

	// null clears the key's limit.
	a = must(g.adminCall("PATCH", "/admin/v1/keys/"+tightID, `{"rpm":null}`), 200)
	if gjson.Get(a.Body, "rpm").Raw != "null" {
		t.Errorf("cleared: %s", a.Body)
	}
}
