package server

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/clock"
)

// TestKeyUsageShown: GET /v1/usage and the admin overview show an issued
// key's own limits beside its tenant's, through the real server: after one
// request a key with rpm 2 and a budget has 1 rpm left and settled spend
// in its own ledger; a key without limits of its own has no key object.
func TestKeyUsageShown(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	g := startGatewayClock(t, pricedYAML("auth:\n  keys:\n    sk-ops: {tenant: ops, role: admin}\n"), clk)
	must := g.must
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	must(g.adminCall("POST", "/admin/v1/tenants", `{"name":"team","rpm":100,"budget_usd":100}`), 201)
	a := must(g.adminCall("POST", "/admin/v1/keys", `{"name":"capped","tenant":"team","rpm":2,"daily_requests":5,"budget_usd":3,"budget_window_secs":3600}`), 201)
	capped, cappedID := gjson.Get(a.Body, "secret").String(), gjson.Get(a.Body, "id").String()
	a = must(g.adminCall("POST", "/admin/v1/keys", `{"name":"plain","tenant":"team"}`), 201)
	plain, plainID := gjson.Get(a.Body, "secret").String(), gjson.Get(a.Body, "id").String()

	must(g.post("/v1/chat/completions", body, "Authorization", "Bearer "+capped), 200)
	u := must(g.get("/v1/usage", "Authorization", "Bearer "+capped), 200).Body
	k := gjson.Get(u, "key")
	for _, c := range []struct {
		path string
		want int64
	}{
		{"limits.rpm.limit", 2}, {"limits.rpm.remaining", 1},
		{"limits.daily_requests.limit", 5}, {"limits.daily_requests.remaining", 4},
		{"requests_today", 1}, {"spend.window_secs", 3600}, {"spend.budget_nano_usd", 3_000_000_000},
	} {
		if got := k.Get(c.path).Int(); got != c.want {
			t.Errorf("key.%s = %d, want %d: %s", c.path, got, c.want, u)
		}
	}
	settled, rem := k.Get("spend.settled_nano_usd").Int(), k.Get("spend.remaining_nano_usd").Int()
	if k.Get("id").String() != cappedID || settled <= 0 || rem != 3_000_000_000-settled-k.Get("spend.reserved_nano_usd").Int() ||
		k.Get("spend.settled_usd").Float() <= 0 {
		t.Errorf("key spend: %s", u)
	}
	// The tenant's own section is unchanged: its rpm 100 and its budget.
	if gjson.Get(u, "limits.rpm.limit").Int() != 100 || gjson.Get(u, "spend.budget_usd").Float() != 100 {
		t.Errorf("tenant section: %s", u)
	}

	must(g.post("/v1/chat/completions", body, "Authorization", "Bearer "+plain), 200)
	if u = must(g.get("/v1/usage", "Authorization", "Bearer "+plain), 200).Body; gjson.Get(u, "key").Exists() {
		t.Errorf("a key without limits of its own shows key: %s", u)
	}

	o := must(g.adminCall("GET", "/admin/v1/overview", ""), 200).Body
	row := gjson.Get(o, `keys.#(id=="`+cappedID+`")`)
	if row.Get("limits.rpm.remaining").Int() != 1 || row.Get("spend.settled_nano_usd").Int() != settled ||
		row.Get("spend.budget_usd").Float() != 3 {
		t.Errorf("overview row of the capped key: %s", row.Raw)
	}
	if p := gjson.Get(o, `keys.#(id=="`+plainID+`")`); !p.Exists() || p.Get("limits").Exists() || p.Get("spend").Exists() {
		t.Errorf("overview row of the plain key: %s", p.Raw)
	}
	// The /admin page shows the key's own limits in its row.
	bin := chromiumBin(t)
	if dom := chromiumDOM(t, bin, g.URL+"/admin#token=sk-ops"); !strings.Contains(dom, `data-key-limits="`+cappedID+`"`) ||
		!strings.Contains(dom, "rpm 1 of 2 left") || !strings.Contains(dom, "of $3.00") {
		t.Errorf("the admin page lacks the key's own limits")
	}
}
