package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckWarnsUnusableUnderBudget: check names every route entry that a
// budgeted key cannot use (no price), and only those.
func TestCheckWarnsUnusableUnderBudget(t *testing.T) {
	dir := t.TempDir()
	body := `providers:
  upstream-openai: {type: openai, base_url: "http://127.0.0.1:1/v1", api_key: k}
  paid: {type: mock}
models:
  - name: m
    providers: [{provider: upstream-openai, model: my-local-model}, {provider: paid, model: priced}]
pricing:
  paid:
    priced: {input: 1, output: 1, context: 1000, max_output: 100}
auth:
  keys:
    sk-1: {tenant: acme, budget_usd: 1}
`
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte(body), 0o644)
	var out, errb bytes.Buffer
	if code := run([]string{"check", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if n := strings.Count(out.String(), "warning:"); n != 1 ||
		!strings.Contains(out.String(), `models[0].providers[0] (model "m", provider "upstream-openai"): keys with budget_usd cannot use it`) ||
		!strings.Contains(out.String(), `pricing.upstream-openai."my-local-model"`) {
		t.Fatalf("%d warnings:\n%s", n, out.String())
	}
	// Without budgeted keys the entry is usable by everyone: no warning.
	os.WriteFile(path, []byte(strings.Replace(body, "budget_usd: 1", "rpm: 5", 1)), 0o644)
	out.Reset()
	run([]string{"check", path}, &out, &errb)
	if strings.Contains(out.String(), "warning:") {
		t.Fatalf("warned without budgets:\n%s", out.String())
	}
}
