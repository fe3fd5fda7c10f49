package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/admit"
	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/store"
	"switchboard/internal/store/redistest"
	"switchboard/internal/usagelog"
)

// usageGateway serves yaml over a real SQLite ledger and a real usage-log
// file, both in a temporary directory.
func usageGateway(t *testing.T, yaml string) (*gateway, store.Store, *usagelog.Log) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := store.OpenSQLite(filepath.Join(dir, "switchboard.db"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := usagelog.Open(filepath.Join(dir, usagelog.DefaultFile))
	if err != nil {
		t.Fatal(err)
	}
	s := New(slog.New(slog.NewTextHandler(io.Discard, nil)), clock.Real{}, nil)
	ul := usagelog.NewLog(db, usagelog.Options{Registerer: s.Metrics.Registry})
	s.SetUsageLog(ul)
	s.Admission = admit.New(st, s.Clock, s.Metrics.Registry)
	s.Apply(cfg)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		ul.Close()
		db.Close()
		st.Close()
	})
	return &gateway{Server: s, URL: ts.URL, t: t}, st, ul
}

// billingUpstream is an OpenAI-compatible provider that states its own
// bill (usage.cost) and fails every other call with a 500 that it bills
// too: the failed attempt is charged, then the retry's bill.
func billingUpstream(t *testing.T) string {
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1)%2 == 1 {
			w.WriteHeader(500)
			_, _ = io.WriteString(w, `{"error":{"message":"generation failed","type":"server_error"},"usage":{"prompt_tokens":12,"completion_tokens":4,"cost":0.0000123}}`)
			return
		}
		if gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"bill-m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`+"\n\n"+
				`data: {"id":"c","object":"chat.completion.chunk","model":"bill-m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
				`data: {"id":"c","object":"chat.completion.chunk","model":"bill-m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"cost":0.0000789}}`+"\n\n"+
				"data: [DONE]\n\n")
			return
		}
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","model":"bill-m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"cost":0.0000456}}`)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// waitRows waits until l holds want rows: a handler records its row as
// it returns, which may be just after its client has the answer.
func waitRows(t *testing.T, l *usagelog.Log, want int64) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := l.DB().Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
		if n > want || time.Now().After(deadline) {
			t.Fatalf("%d usage rows, want one per request: %d", n, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// usageYAML: three tenants (two budgeted, one not), a model whose first
// provider fails a third of its requests (retries, fallbacks), one whose
// first provider cuts its streams after their first token (kept holds),
// one whose provider bills its answers and its failures itself, and a
// plain one; all priced.
const usageYAML = `providers:
  billing: {base_url: ${BILLING}, api_key: x}
  steady: {type: mock, mock: {tokens: 7}}
  flaky: {type: mock, mock: {tokens: 11, fail_rate: 0.33, fail_status: 503}}
  cutter: {type: mock, mock: {tokens: 9, cut_after_chunks: 3}}
  slowpoke: {type: mock, mock: {tokens: 5, ttft_ms: 40}}
models:
  - name: plain
    providers: [{provider: steady, model: steady-m}]
  - name: shaky
    providers: [{provider: flaky, model: flaky-m}, {provider: steady, model: steady-m}]
  - name: cut
    providers: [{provider: cutter, model: cutter-m}]
  - name: billed
    providers: [{provider: billing, model: bill-m}]
  - name: hedged
    hedge: {after: 5ms}
    providers: [{provider: slowpoke, model: slow-m}, {provider: steady, model: steady-m}]
pricing:
  billing: {bill-m: {input: 2, output: 8, context: 10000, max_output: 100}}
  slowpoke: {slow-m: {input: 5, output: 25, context: 10000, max_output: 100}}
  steady: {steady-m: {input: 3, output: 15, context: 10000, max_output: 100}}
  flaky: {flaky-m: {input: 1.1, output: 4.4, context: 10000, max_output: 100}}
  cutter: {cutter-m: {input: 0.7, output: 2.9, context: 10000, max_output: 100}}
retries: {max_attempts: 2, max_rounds: 1, backoff_base: 0.001, max_backoff: 0.002}
auth:
  keys:
    k-acme: {tenant: acme, budget_usd: 1000, budget_window_secs: 31536000}
    k-beta: {tenant: beta, budget_usd: 500, budget_window_secs: 31536000}
    k-gamma: {tenant: gamma, rpm: 100000, budget_window_secs: 31536000}
`

// TestUsageSumsEqualLedger: after 1,000 mixed requests (unary and
// streamed, chat and Messages, three tenants, five models, failures
// with retries and fallbacks, streams cut after their first token,
// providers billing their failures, hedged races whose losers end after
// the answer) the
// usage log has one row per request and its costs sum, per tenant, to the
// spend the ledger settled, to the nano-USD.
func TestUsageSumsEqualLedger(t *testing.T) {
	g, st, ul := usageGateway(t, strings.ReplaceAll(usageYAML, "${BILLING}", billingUpstream(t)))
	keys := []string{"k-acme", "k-beta", "k-gamma"}
	models := []string{"plain", "shaky", "cut", "billed", "hedged"}
	const n = 1000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	statuses := make([]int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			model := models[i%5]
			stream := (i/5)%2 == 1
			path, body := "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":50,"messages":[{"role":"user","content":"request %d"}]}`, model, stream, i)
			if i%7 == 3 {
				path = "/v1/messages"
			}
			statuses[i] = g.post(path, body, "x-api-key", keys[(i/3)%3]).Status
		}(i)
	}
	wg.Wait()
	waitRows(t, ul, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db := ul.DB()
	groups, err := db.Summarize(ctx, usagelog.Filter{}, []string{"tenant"})
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]usagelog.Group{}
	for _, gr := range groups {
		logged[gr.Keys["tenant"]] = gr
	}
	var total, held int64
	for _, tn := range []string{"acme", "beta", "gamma"} {
		rep, err := st.Usage(ctx, store.UsageQuery{Now: time.Now(), Tenant: tn, WindowSecs: 31536000})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Settled == 0 {
			t.Fatalf("tenant %s settled nothing", tn)
		}
		if got := logged[tn].CostNano; got != rep.Settled {
			t.Errorf("tenant %s: usage rows sum to %d nano-USD, the ledger settled %d", tn, got, rep.Settled)
		}
		total += rep.Settled
		held += logged[tn].HeldNano
	}
	// The mix did what it says: fallbacks (more attempts than requests on
	// the shaky model), cut streams (holds kept), failures seen.
	byModel, err := db.Summarize(ctx, usagelog.Filter{Model: "shaky"}, nil)
	if err != nil || len(byModel) != 1 {
		t.Fatal(byModel, err)
	}
	var attempts int
	if err := db.Each(ctx, usagelog.Filter{Model: "shaky"}, n, func(r usagelog.Row) error {
		attempts += r.Attempts
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if attempts <= int(byModel[0].Requests) {
		t.Fatalf("no retries or fallbacks on the shaky model: %d attempts for %d requests", attempts, byModel[0].Requests)
	}
	if held == 0 {
		t.Fatal("no cut stream kept its hold: the mix lacks uncertain outcomes")
	}
	ok := 0
	for _, s := range statuses {
		if s == 200 {
			ok++
		}
	}
	t.Logf("%d requests (%d answered 200), %d attempts on shaky, settled %d nano-USD, held %d", n, ok, attempts, total, held)
}

// TestAdminUsageAPI: through the real server, an admin reads sums grouped
// as asked, pages of requests with a cursor and streamed exports; tenant
// keys get 403, no key 401, and every bad parameter a 400 invalid_value
// naming it (the admin API's code for a bad parameter).
func TestAdminUsageAPI(t *testing.T) {
	g, _, ul := usageGateway(t, usageAdminYAML)
	for i := range 9 {
		key, model := []string{"k-acme", "k-beta", "k-acme"}[i%3], []string{"plain", "other"}[i%2]
		body := fmt.Sprintf(`{"model":%q,"max_tokens":20,"stream":%t,"messages":[{"role":"user","content":"hi %d"}]}`, model, i%4 == 0, i)
		if a := g.post("/v1/chat/completions", body, "Authorization", "Bearer "+key); a.Status != 200 {
			t.Fatalf("%d %s", a.Status, a.Body)
		}
	}
	// One refusal, logged with its status and no attempt.
	if a := g.post("/v1/chat/completions", `{"model":"plain","max_tokens":100000000,"messages":[{"role":"user","content":"x"}]}`,
		"Authorization", "Bearer k-acme"); a.Status == 200 {
		t.Fatalf("the oversized request passed: %s", a.Body)
	}
	waitRows(t, ul, 10)
	admin := []string{"Authorization", "Bearer k-admin"}

	a := g.get("/admin/v1/usage?group_by=tenant", admin...)
	if a.Status != 200 || gjson.Get(a.Body, "data.#").Int() != 2 || gjson.Get(a.Body, "total.requests").Int() != 10 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	acme := gjson.Get(a.Body, `data.#(tenant=="acme")`)
	if acme.Get("requests").Int() != 7 || acme.Get("cost_nano_usd").Int() <= 0 || acme.Get("prompt_tokens").Int() <= 0 {
		t.Fatalf("acme: %s", acme.Raw)
	}
	// The usage row's cost is what /v1/usage reports as settled for the key.
	u := g.get("/v1/usage", "Authorization", "Bearer k-acme")
	settled := gjson.Get(u.Body, "spend.settled_usd").Float()
	if got := acme.Get("cost_usd").Float(); u.Status != 200 || got != settled {
		t.Fatalf("usage rows cost %v USD, /v1/usage settled %v: %s", got, settled, u.Body)
	}

	a = g.get("/admin/v1/usage?group_by=tenant,model&tenant=acme&format=csv", admin...)
	lines := strings.Split(strings.TrimSpace(a.Body), "\n")
	if a.Status != 200 || !strings.HasPrefix(a.Header.Get("Content-Type"), "text/csv") ||
		lines[0] != "tenant,model,requests,prompt_tokens,completion_tokens,cost_nano_usd,cost_usd,held_nano_usd,unpriced_requests,cache_hits,saved_nano_usd" || len(lines) != 3 {
		t.Fatalf("%d %q\n%s", a.Status, a.Header.Get("Content-Type"), a.Body)
	}
	a = g.get("/admin/v1/usage?group_by=day&format=jsonl&status=4xx", admin...)
	if a.Status != 200 || strings.Count(a.Body, "\n") != 1 || gjson.Get(a.Body, "requests").Int() != 1 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}

	// Pages of 4 walk every row once, newest first.
	seen := map[string]bool{}
	cursor := ""
	for page := 0; page < 5; page++ {
		a = g.get("/admin/v1/requests?limit=4"+cursor, admin...)
		if a.Status != 200 {
			t.Fatalf("%d %s", a.Status, a.Body)
		}
		for _, r := range gjson.Get(a.Body, "data").Array() {
			id := r.Get("request_id").String()
			if seen[id] || r.Get("key_id").String() == "" || !strings.HasPrefix(r.Get("key_id").String(), "cfg-") {
				t.Fatalf("row %s", r.Raw)
			}
			seen[id] = true
		}
		next := gjson.Get(a.Body, "next_cursor")
		if next.Type == gjson.Null {
			break
		}
		cursor = "&cursor=" + next.String()
	}
	if len(seen) != 10 {
		t.Fatalf("the pages held %d rows, want 10", len(seen))
	}
	a = g.get("/admin/v1/requests?status=200&model=other&format=csv", admin...)
	if a.Status != 200 || len(strings.Split(strings.TrimSpace(a.Body), "\n")) != 1+4 ||
		!strings.HasPrefix(a.Body, "id,time,request_id,tenant,key_id,model,provider,provider_model") {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	a = g.get("/admin/v1/requests?format=jsonl&tenant=beta", admin...)
	for _, l := range strings.Split(strings.TrimSpace(a.Body), "\n") {
		if gjson.Get(l, "tenant").String() != "beta" || !gjson.Get(l, "cost_usd").Exists() {
			t.Fatalf("line %s", l)
		}
	}
	if strings.Contains(a.Body, "hi 1") {
		t.Fatal("a prompt reached the usage log")
	}

	for _, tc := range []struct {
		path, param string
	}{
		{"/admin/v1/usage?group_by=colour", "group_by"},
		{"/admin/v1/usage?group_by=day,day", "group_by"},
		{"/admin/v1/usage?from=yesterday", "from"},
		{"/admin/v1/usage?from=2026-02-01&to=2026-01-01", "to"},
		{"/admin/v1/usage?status=6xx", "status"},
		{"/admin/v1/usage?format=xml", "format"},
		{"/admin/v1/usage?limit=3", "limit"},
		{"/admin/v1/requests?limit=0", "limit"},
		{"/admin/v1/requests?limit=1001", "limit"},
		{"/admin/v1/requests?cursor=abc", "cursor"},
		{"/admin/v1/requests?group_by=tenant", "group_by"},
		{"/admin/v1/requests?tenant=a&tenant=b", "tenant"},
	} {
		a := g.get(tc.path, admin...)
		if a.Status != 400 || gjson.Get(a.Body, "error.param").String() != tc.param || gjson.Get(a.Body, "error.code").String() != "invalid_value" {
			t.Errorf("%s: %d %s", tc.path, a.Status, a.Body)
		}
	}
	if a := g.get("/admin/v1/usage", "Authorization", "Bearer k-acme"); a.Status != 403 {
		t.Errorf("tenant key: %d %s", a.Status, a.Body)
	}
	if a := g.get("/admin/v1/requests"); a.Status != 401 {
		t.Errorf("no key: %d %s", a.Status, a.Body)
	}
	if a := g.post("/admin/v1/usage", "{}", admin...); a.Status != 405 {
		t.Errorf("POST: %d %s", a.Status, a.Body)
	}
}

// TestAdminUsageOff: with no usage log the queries say so.
func TestAdminUsageOff(t *testing.T) {
	g := startGateway(t, usageAdminYAML)
	a := g.get("/admin/v1/usage", "Authorization", "Bearer k-admin")
	if a.Status != 404 || gjson.Get(a.Body, "error.code").String() != "usage_log_disabled" {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
}

// TestQueueUsageRowByWorker: with the queue on, the worker that runs a
// request writes its row (once, with the ingress's request id); the
// ingress writes none.
func TestQueueUsageRowByWorker(t *testing.T) {
	srv := redistest.Start(t)
	yaml := mockYAML("m", "a") + "auth:\n  keys:\n    sk-acme: {tenant: acme}\n"
	reps := startQueued(t, srv, yaml, "", ingressOnly, workerOnly)
	var logs []*usagelog.Log
	for _, r := range reps {
		db, err := usagelog.Open(filepath.Join(t.TempDir(), usagelog.DefaultFile))
		if err != nil {
			t.Fatal(err)
		}
		l := usagelog.NewLog(db, usagelog.Options{})
		t.Cleanup(func() { l.Close(); db.Close() })
		r.SetUsageLog(l)
		logs = append(logs, l)
	}
	a := reps[0].post("/v1/chat/completions", chatBody, "Authorization", "Bearer sk-acme", "X-Request-Id", "req-queued-1")
	if a.Status != 200 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	ctx := context.Background()
	// The worker records its row as its handler returns, which may be just
	// after the ingress relayed the answer.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var counts []int64
		for _, l := range logs {
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			n, err := l.DB().Count(ctx)
			if err != nil {
				t.Fatal(err)
			}
			counts = append(counts, n)
		}
		if counts[0] == 0 && counts[1] == 1 {
			break
		}
		if counts[0] != 0 || counts[1] > 1 || time.Now().After(deadline) {
			t.Fatalf("rows: ingress %d, worker %d; want 0 and 1", counts[0], counts[1])
		}
		time.Sleep(10 * time.Millisecond)
	}
	rows, _, err := logs[1].DB().List(ctx, usagelog.Filter{}, 0, 10)
	if err != nil || rows[0].RequestID != "req-queued-1" || rows[0].Tenant != "acme" || rows[0].Status != 200 || rows[0].Provider != "a" {
		t.Fatalf("%+v %v", rows, err)
	}
	// A request the ingress refuses before enqueueing it (the queue is
	// unreachable) never reaches a worker: the ingress records its row.
	srv.Kill()
	if a := reps[0].post("/v1/chat/completions", chatBody, "Authorization", "Bearer sk-acme", "X-Request-Id", "req-refused-1"); a.Status != 503 {
		t.Fatalf("with redis down: %d %s", a.Status, a.Body)
	}
	waitRows(t, logs[0], 1)
	rows, _, err = logs[0].DB().List(ctx, usagelog.Filter{}, 0, 10)
	if err != nil || rows[0].RequestID != "req-refused-1" || rows[0].Status != 503 || rows[0].Tenant != "acme" || rows[0].Attempts != 0 {
		t.Fatalf("ingress row: %+v %v", rows, err)
	}
}

// TestUsageRowWithoutAuth: with auth off nothing is metered by the
// ledger; the row is priced from the catalog, as the answer's cost_usd.
func TestUsageRowWithoutAuth(t *testing.T) {
	g, _, ul := usageGateway(t, pricedYAML(""))
	a := g.post("/v1/chat/completions", `{"model":"m","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`)
	if a.Status != 200 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	waitRows(t, ul, 1)
	rows, _, err := ul.DB().List(context.Background(), usagelog.Filter{}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := rows[0]
	want := gjson.Get(a.Body, "usage.cost_usd").Float()
	if r.Tenant != "anonymous" || r.KeyID != "" || r.Attempts != 1 || want <= 0 || float64(r.CostNano)/1e9 != want ||
		r.PromptTokens != gjson.Get(a.Body, "usage.prompt_tokens").Int() || r.Stream || r.TTFTMs != nil || r.Unpriced {
		t.Fatalf("row %+v; answer %s", r, a.Body)
	}
}

// TestUsageRowUnpriced: a model without a price gets a row whose cost is
// unknown (cost_usd null, unpriced), never a cost of 0 USD.
func TestUsageRowUnpriced(t *testing.T) {
	g, _, ul := usageGateway(t, mockYAML("m", "a")+"auth: {keys: {k: {tenant: acme}}}\n")
	a := g.post("/v1/chat/completions", chatBody, "Authorization", "Bearer k")
	if a.Status != 200 || gjson.Get(a.Body, "usage.cost_usd").Type != gjson.Null {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	waitRows(t, ul, 1)
	rows, _, err := ul.DB().List(context.Background(), usagelog.Filter{}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rows[0])
	if !rows[0].Unpriced || rows[0].CostNano != 0 || gjson.GetBytes(b, "cost_usd").Type != gjson.Null || rows[0].PromptTokens == 0 {
		t.Fatalf("row %s", b)
	}
	g2, err := ul.DB().Summarize(context.Background(), usagelog.Filter{}, []string{"tenant"})
	if err != nil || g2[0].Unpriced != 1 {
		t.Fatalf("%+v %v", g2, err)
	}
}

// TestUsageRowForRefusals: a key's requests refused before they are served
// (an invalid field, an unknown model, a body over the limit) are rows too,
// under the key, with the status it got and no attempt or cost; a request
// without a valid key is no row (there is no tenant to log it under).
func TestUsageRowForRefusals(t *testing.T) {
	g, _, ul := usageGateway(t, mockYAML("m", "a")+"limits: {max_request_body: 2048}\nauth: {keys: {k: {tenant: acme}}}\n")
	tests := []struct {
		body        string
		key         string
		status      int
		model, path string
	}{
		{`{"model":"m","n":0,"messages":[]}`, "k", 400, "m", "/v1/chat/completions"},
		{`{"model":"ghost","messages":[]}`, "k", 404, "ghost", "/v1/chat/completions"},
		{`{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}]}`, "k", 413, "", "/v1/messages"},
		{`{"model":"m","messages":[]}`, "wrong", 401, "", "/v1/chat/completions"},
	}
	for _, tt := range tests {
		if a := g.post(tt.path, tt.body, "Authorization", "Bearer "+tt.key); a.Status != tt.status {
			t.Fatalf("%s: %d %s", tt.body[:min(len(tt.body), 40)], a.Status, a.Body)
		}
	}
	waitRows(t, ul, 3)
	// A client's model name never reaches a row raw: escapes, not ESC or
	// CR bytes for an operator's terminal, and short enough to filter on.
	hostile := `{"model":"x\u001b[31m\r\n` + strings.Repeat("y", 1500) + `","messages":[]}`
	if a := g.post("/v1/chat/completions", hostile, "Authorization", "Bearer k"); a.Status != 404 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
	waitRows(t, ul, 4)
	odd, _, err := ul.DB().List(context.Background(), usagelog.Filter{}, 0, 1)
	if err != nil || len(odd) != 1 || !strings.HasPrefix(odd[0].Model, `x\x1b[31m\x0d\x0ayyy`) || len(odd[0].Model) > usagelog.MaxClientText {
		t.Fatalf("hostile model row: %+v %v", odd, err)
	}
	if n, err := ul.DB().Count(context.Background()); err != nil || n != 4 {
		t.Fatal(n, err)
	}
	rows, _, err := ul.DB().List(context.Background(), usagelog.Filter{}, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	rows = rows[1:] // the hostile one, newest
	slices.SortFunc(rows, func(a, b usagelog.Row) int { return a.Status - b.Status })
	for i, r := range rows {
		tt := tests[i] // the refused ones are in status order
		wantEP := strings.TrimPrefix(tt.path, "/v1/")
		if r.Tenant != "acme" || r.KeyID == "" || r.Status != tt.status || r.Model != tt.model || r.Endpoint != wantEP ||
			r.Attempts != 0 || r.CostNano != 0 || r.Provider != "" || r.RequestID == "" {
			t.Errorf("row %d: %+v, want status %d model %q endpoint %s", i, r, tt.status, tt.model, wantEP)
		}
	}
}
