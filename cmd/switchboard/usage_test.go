package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"switchboard/internal/config"
	"switchboard/internal/inference"
	"switchboard/internal/provider/mock"
	"switchboard/internal/server"
	"switchboard/internal/usagelog"
)

// usageFixture writes six rows to a fresh usage log and returns its path.
func usageFixture(t *testing.T) (string, *usagelog.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), usagelog.DefaultFile)
	db, err := usagelog.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	at := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	var rows []usagelog.Row
	for i, tn := range []string{"acme", "beta", "acme", "acme", "beta", "acme"} {
		ttft := int64(40 + i)
		rows = append(rows, usagelog.Row{Time: at.Add(time.Duration(i) * time.Hour), RequestID: "req_" + string(rune('a'+i)),
			Tenant: tn, KeyID: "cfg-" + tn, Model: []string{"m1", "m2"}[i%2], Provider: "p", ProviderModel: "pm",
			Endpoint: "chat/completions", Status: []int{200, 200, 429, 200, 200, 200}[i], Attempts: 1, PromptTokens: 10,
			CompletionTokens: 5, CostNano: int64(1000 * (i + 1)), TTFTMs: &ttft, DurationMs: 90, Stream: i%2 == 0})
	}
	if err := db.Insert(context.Background(), rows...); err != nil {
		t.Fatal(err)
	}
	return path, db
}

// TestUsageCommandLocal: switchboard usage reads a usage-log file: sums
// as a table, CSV and JSON, rows as JSON lines and pages, and refuses bad
// flags naming them.
func TestUsageCommandLocal(t *testing.T) {
	path, _ := usageFixture(t)
	dir := filepath.Dir(path)
	runCLICases(t, []cliCase{
		{"sums by tenant", []string{"usage", "--db", path, "--group-by", "tenant"}, 0,
			[]string{"tenant", "acme", "4", "0.000014", "beta", "0.000007", "total", "6", "0.000021"}, nil},
		{"the state dir's file", []string{"usage", "--state-dir", dir, "--config", filepath.Join(dir, "none.yaml"), "--format", "json"}, 0,
			[]string{`"requests": 6`, `"cost_nano_usd": 21000`}, nil},
		{"csv by day and model", []string{"usage", "summary", "--db", path, "--group-by", "day,model", "--format", "csv", "--tenant", "acme"}, 0,
			[]string{"day,model,requests,prompt_tokens,completion_tokens,cost_nano_usd,cost_usd,held_nano_usd,unpriced_requests\n", "2026-05-04,m2,2,20,10,10000,0.00001,0,0\n", "2026-05-04,m1,2,20,10,4000,0.000004,0,0\n"}, nil},
		{"4xx only", []string{"usage", "--db", path, "--status", "4xx", "--format", "jsonl"}, 0, []string{`"requests":1`, `"cost_nano_usd":3000`}, nil},
		{"requests as jsonl", []string{"usage", "requests", "--db", path, "--model", "m2", "--format", "jsonl"}, 0,
			[]string{`"request_id":"req_f"`, `"request_id":"req_b"`, `"ttft_ms":45`}, nil},
		{"a page and its cursor", []string{"usage", "requests", "--db", path, "--limit", "2"}, 0, []string{"req_f", "req_e", "more: --cursor"}, nil},
		{"from and to", []string{"usage", "requests", "--db", path, "--from", "2026-05-04T12:00:00Z", "--to", "2026-05-04T14:00:00Z", "--format", "csv"}, 0,
			[]string{"req_c", "req_d"}, nil},
		{"bad group-by", []string{"usage", "--db", path, "--group-by", "colour"}, 2, nil, []string{"--group-by", `unknown dimension "colour"`}},
		{"bad from", []string{"usage", "requests", "--db", path, "--from", "soon"}, 2, nil, []string{"--from: must be RFC 3339"}},
		{"limit on sums", []string{"usage", "--db", path, "--limit", "3"}, 2, nil, []string{"--limit does not apply"}},
		{"bad format", []string{"usage", "--db", path, "--format", "xml"}, 2, nil, []string{"--format"}},
		{"unknown word", []string{"usage", "everything"}, 2, nil, []string{"usage: switchboard usage"}},
		{"no file", []string{"usage", "--db", filepath.Join(dir, "missing.db")}, 1, nil, []string{"error:", "missing.db"}},
		{"a file and a url", []string{"usage", "--db", path, "--url", "http://127.0.0.1:1"}, 2, nil, []string{"--url queries a gateway, --db names a file"}},
		{"a key without a url", []string{"usage", "--db", path, "--key", "sk-admin"}, 2, nil, []string{"--key is the admin key for --url"}},
	})
}

// usageGateway serves yaml with db as its usage log.
func usageGateway(t *testing.T, db *usagelog.DB, yaml string) (*server.Server, *usagelog.Log, *httptest.Server) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	ul := usagelog.NewLog(db, usagelog.Options{})
	t.Cleanup(ul.Close)
	srv.SetUsageLog(ul)
	srv.Apply(cfg)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return srv, ul, ts
}

// TestUsageCommandURL: the same queries against a gateway's admin API,
// with the admin key from the environment.
func TestUsageCommandURL(t *testing.T) {
	_, db := usageFixture(t)
	_, _, ts := usageGateway(t, db, `providers: {p: {type: mock}}
models: [{name: m1, providers: [{provider: p}]}]
auth: {keys: {sk-admin: {tenant: ops, role: admin}, sk-t: {tenant: t}}}
`)
	t.Setenv("SWITCHBOARD_ADMIN_KEY", "sk-admin")
	runCLICases(t, []cliCase{
		{"sums", []string{"usage", "--url", ts.URL, "--group-by", "tenant,model"}, 0, []string{"acme", "m1", "total", "0.000021"}, nil},
		{"csv passes through", []string{"usage", "--url", ts.URL + "/", "--group-by", "tenant", "--format", "csv"}, 0,
			[]string{"tenant,requests", "acme,4,40,20,14000,0.000014,0,0"}, nil},
		{"requests page", []string{"usage", "requests", "--url", ts.URL, "--limit", "2", "--tenant", "acme"}, 0, []string{"req_f", "req_d", "more: --cursor"}, nil},
		{"requests jsonl", []string{"usage", "requests", "--url", ts.URL, "--format", "jsonl", "--status", "429"}, 0, []string{`"request_id":"req_c"`}, nil},
		{"a tenant key", []string{"usage", "--url", ts.URL, "--key", "sk-t"}, 1, nil, []string{"403", "tenant key"}},
		{"a bad url", []string{"usage", "--url", "localhost:4567"}, 1, nil, []string{"--url must be"}},
	})
}

// TestUsageCommandServedModel: a request a cross-model fallback served,
// through a real gateway writing a real usage-log file: the CLI shows
// model small and served_model big, from the gateway's admin API and
// from the file, filters and groups by served_model.
func TestUsageCommandServedModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), usagelog.DefaultFile)
	db, err := usagelog.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv, ul, ts := usageGateway(t, db, `providers:
  s1: {type: mock, mock: {tokens: 3}}
  b1: {type: mock, mock: {tokens: 3}}
models:
  - name: small
    providers: [{provider: s1}]
    fallbacks: {models: [big], on: [error]}
  - name: big
    providers: [{provider: b1}]
retries: {max_attempts: 1, max_rounds: 1}
auth: {keys: {sk-admin: {tenant: ops, role: admin}, sk-t: {tenant: t}}}
`)
	srv.Provider("s1").(*mock.Provider).Script(mock.Fault{Status: 503})
	for _, want := range []string{"big", ""} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"small","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer sk-t")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get(inference.FallbackModelHeader) != want {
			t.Fatalf("%d, fallback %q, want %q", resp.StatusCode, resp.Header.Get(inference.FallbackModelHeader), want)
		}
	}
	// Each handler records its row as it returns: wait for both.
	deadline := time.Now().Add(10 * time.Second)
	for n := int64(0); n < 2; n, _ = db.Count(context.Background()) {
		if err := ul.Flush(context.Background()); err != nil || time.Now().After(deadline) {
			t.Fatalf("%d rows, want 2 (%v)", n, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Setenv("SWITCHBOARD_ADMIN_KEY", "sk-admin")
	fellBack := regexp.MustCompile(`(?m)^\S+\s+\S+\s+t\s+cfg-\S+\s+small\s+big\s+b1\s+200\s`)
	itself := regexp.MustCompile(`(?m)^\S+\s+\S+\s+t\s+cfg-\S+\s+small\s+small\s+s1\s+200\s`)
	tests := []struct {
		name          string
		args          []string
		match, refuse []*regexp.Regexp
	}{
		{"gateway table", []string{"usage", "requests", "--url", ts.URL}, []*regexp.Regexp{fellBack, itself}, nil},
		{"file table", []string{"usage", "requests", "--db", path}, []*regexp.Regexp{fellBack, itself}, nil},
		{"gateway filter", []string{"usage", "requests", "--url", ts.URL, "--served-model", "big"}, []*regexp.Regexp{fellBack}, []*regexp.Regexp{itself}},
		{"file filter", []string{"usage", "requests", "--db", path, "--served-model", "small"}, []*regexp.Regexp{itself}, []*regexp.Regexp{fellBack}},
		{"gateway sums", []string{"usage", "--url", ts.URL, "--group-by", "model,served_model"},
			[]*regexp.Regexp{regexp.MustCompile(`(?m)^\s*model\s+served_model\s+requests`), regexp.MustCompile(`(?m)^\s*small\s+big\s+1\s`), regexp.MustCompile(`(?m)^\s*small\s+small\s+1\s`)}, nil},
		{"file csv", []string{"usage", "requests", "--db", path, "--format", "csv", "--served-model", "big"},
			[]*regexp.Regexp{regexp.MustCompile(`(?m),unpriced,served_model,tags$`), regexp.MustCompile(`(?m),small,b1,[^\n]*,big,$`)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tt.args, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			for _, re := range tt.match {
				if !re.MatchString(out.String()) {
					t.Errorf("stdout lacks %s:\n%s", re, out.String())
				}
			}
			for _, re := range tt.refuse {
				if re.MatchString(out.String()) {
					t.Errorf("stdout has %s:\n%s", re, out.String())
				}
			}
		})
	}
}

// TestUsageCommandRawClientText: a file whose rows hold a client's raw
// model name (written before names were escaped, or by hand) still prints
// no terminal escape in a table (CSV is data: it keeps the value, quoted;
// see usagelog.TestCSVIsUTF8).
func TestUsageCommandRawClientText(t *testing.T) {
	path := filepath.Join(t.TempDir(), usagelog.DefaultFile)
	db, err := usagelog.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	raw := "x\x1b[31m\r\n\xff"
	row := usagelog.Row{Time: time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC), RequestID: "req_raw", Tenant: "acme", KeyID: "cfg-acme",
		Model: raw, Endpoint: "chat/completions", Status: 404}
	if err := db.Insert(context.Background(), row); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"usage", "requests", "--db", path},
		{"usage", "--db", path, "--group-by", "model"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		if s := out.String(); strings.ContainsAny(s, "\x1b\r") || !utf8.ValidString(s) {
			t.Errorf("%v prints the raw name: %q", args, s)
		}
	}
}

// TestUsageCommandTags: --group-by tag:<key> sums by a tag's value and
// --tag selects the rows carrying it; rows print their tags.
func TestUsageCommandTags(t *testing.T) {
	path, db := usageFixture(t)
	at := time.Date(2026, 5, 4, 20, 0, 0, 0, time.UTC)
	if err := db.Insert(context.Background(),
		usagelog.Row{Time: at, RequestID: "req_t1", Tenant: "acme", Model: "m1", Status: 200, CostNano: 7000, Tags: map[string]string{"team": "search"}},
		usagelog.Row{Time: at, RequestID: "req_t2", Tenant: "acme", Model: "m1", Status: 200, CostNano: 9000, Tags: map[string]string{"team": "ads", "feature": "x"}},
	); err != nil {
		t.Fatal(err)
	}
	runCLICases(t, []cliCase{
		{"sums by team", []string{"usage", "--db", path, "--group-by", "tag:team", "--format", "csv"}, 0,
			[]string{"tag:team,requests,", "ads,1,0,0,9000,", "search,1,0,0,7000,", ",6,60,30,21000,"}, nil},
		{"one team's rows", []string{"usage", "requests", "--db", path, "--tag", "team:ads"}, 0, []string{"req_t2", "feature=x,team=ads"}, nil},
		{"bad tag", []string{"usage", "requests", "--db", path, "--tag", "team"}, 2, nil, []string{"--tag: want key:value"}},
	})
}
