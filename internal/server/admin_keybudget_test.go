package server

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestAdminKeyBudgetAndDaily: an issued key's own budget and daily count
// are kept in a ledger of the key's, in addition to its tenant's, through
// the real server: the key is refused once its budget is spent while its
// tenant has budget left and another key of the tenant is served; raising
// the key's budget by PATCH serves it again; the key's daily count refuses
// its second request of the day while the tenant's other key goes on.
func TestAdminKeyBudgetAndDaily(t *testing.T) {
	g := startGateway(t, pricedYAML("auth:\n  keys:\n    sk-ops: {tenant: ops, role: admin}\n"))
	must := g.must
	// A request reserves its input bound plus 10 output tokens at 1000
	// USD per million (0.168 USD) and costs its 10 mock tokens.
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	must(g.adminCall("POST", "/admin/v1/tenants", `{"name":"team","budget_usd":100}`), 201)
	a := must(g.adminCall("POST", "/admin/v1/keys", `{"name":"capped","tenant":"team","budget_usd":0.5,"budget_window_secs":3600}`), 201)
	capped, cappedID := gjson.Get(a.Body, "secret").String(), gjson.Get(a.Body, "id").String()
	if gjson.Get(a.Body, "budget_usd").Float() != 0.5 || gjson.Get(a.Body, "budget_window_secs").Int() != 3600 {
		t.Fatalf("create shows %s", a.Body)
	}
	other := gjson.Get(must(g.adminCall("POST", "/admin/v1/keys", `{"name":"other","tenant":"team"}`), 201).Body, "secret").String()

	served := 0
	for ; served < 50; served++ {
		a = g.post("/v1/chat/completions", body, "Authorization", "Bearer "+capped)
		if a.Status != 200 {
			break
		}
	}
	code := gjson.Get(a.Body, "error.code").String()
	if served == 0 || served == 50 || (code != "budget_exceeded" && code != "request_exceeds_budget") ||
		!strings.Contains(gjson.Get(a.Body, "error.message").String(), "this key's own spend budget") {
		t.Fatalf("after %d served, the key's budget answered %d %s", served, a.Status, a.Body)
	}
	must(g.post("/v1/chat/completions", body, "Authorization", "Bearer "+other), 200) // the tenant has budget left

	must(g.adminCall("PATCH", "/admin/v1/keys/"+cappedID, `{"budget_usd":5}`), 200)
	must(g.post("/v1/chat/completions", body, "Authorization", "Bearer "+capped), 200)
	au := g.adminCall("GET", "/admin/v1/audit", "").Body
	if gjson.Get(au, `data.#(action=="key.update").fields.budget_usd`).Float() != 5 {
		t.Errorf("audit: %s", au)
	}

	// The key's own daily count.
	must(g.adminCall("PATCH", "/admin/v1/keys/"+cappedID, `{"daily_requests":0}`), 200)
	a = must(g.post("/v1/chat/completions", body, "Authorization", "Bearer "+capped), 429)
	if gjson.Get(a.Body, "error.code").String() != "daily_limit_exceeded" || !strings.Contains(a.Body, "key's own limit") {
		t.Errorf("daily 0: %s", a.Body)
	}
	a = must(g.adminCall("POST", "/admin/v1/keys", `{"name":"once","tenant":"team","daily_requests":1}`), 201)
	once := gjson.Get(a.Body, "secret").String()
	must(g.post("/v1/chat/completions", body, "Authorization", "Bearer "+once), 200)
	a = must(g.post("/v1/chat/completions", body, "Authorization", "Bearer "+once), 429)
	if gjson.Get(a.Body, "error.code").String() != "daily_limit_exceeded" || a.Header.Get("Retry-After") == "" ||
		!strings.Contains(a.Body, "key's own limit") {
		t.Errorf("daily 1, second request: %v %s", a.Header, a.Body)
	}
	must(g.post("/v1/chat/completions", body, "Authorization", "Bearer "+other), 200)
}
