package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/store/redistest"
)

// TestUsageLogFleet: three real replicas on one real Redis each serve a
// share of the requests; every replica's /admin/v1/usage soon answers for
// the whole fleet (each row once), with the ledger's spend.
func TestUsageLogFleet(t *testing.T) {
	usageLogFleet(t, fmt.Sprintf("url: %q", redistest.Start(t).URL))
}

// usageLogFleet runs three replicas whose redis section is redisFields.
func usageLogFleet(t *testing.T, redisFields string) {
	yaml := `providers: {p: {type: mock, mock: {tokens: 6}}}
models: [{name: m, providers: [{provider: p, model: pm}]}]
pricing: {p: {pm: {input: 2, output: 10, context: 10000, max_output: 100}}}
redis: {` + redisFields + `}
auth:
  keys:
    sk-acme: {tenant: acme, budget_usd: 100}
    sk-beta: {tenant: beta}
    sk-admin: {tenant: ops, role: admin}
`
	var reps []*proc
	for i := range 3 {
		reps = append(reps, startProc(t, fmt.Sprintf("r%d", i), yaml, "all"))
	}
	get := func(url, key string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const n = 30
	for i := range n {
		key := []string{"sk-acme", "sk-beta"}[i%2]
		req, _ := http.NewRequest(http.MethodPost, reps[i%3].URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	for _, r := range reps {
		deadline := time.Now().Add(10 * time.Second)
		for {
			// Each replica settles its attempts in Redis just after
			// answering: the ledger too is read until it has them all.
			_, u := get(r.URL+"/v1/usage", "sk-acme")
			settled := gjson.Get(u, "spend.settled_nano_usd").Int()
			code, body := get(r.URL+"/admin/v1/usage?group_by=tenant", "sk-admin")
			acme := gjson.Get(body, `data.#(tenant=="acme")`)
			if code == 200 && gjson.Get(body, "total.requests").Int() == n && settled > 0 && acme.Get("cost_nano_usd").Int() == settled {
				break
			}
			if gjson.Get(body, "total.requests").Int() > n || time.Now().After(deadline) {
				t.Fatalf("%s: %d %s (want %d requests, acme %d nano-USD)", r.name, code, body, n, settled)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
