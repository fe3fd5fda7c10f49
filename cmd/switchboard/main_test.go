package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchboard/internal/config"
	"switchboard/internal/server"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\n"), 0o644)
	two := filepath.Join(dir, "two.yaml")
	os.WriteFile(two, []byte("providers:\n  a: {type: mock}\n  b: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\n  - name: n\n    providers: [{provider: b}]\n"), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: nope}]\nretries:\n  max_attempts: 50\n  max_roundz: 1\n"), 0o644)
	runCLICases(t, []cliCase{
		{"one of each: singular", []string{"check", good}, 0, []string{"good.yaml: ok (1 provider, 1 model)\n"}, nil},
		{"two of each: plural", []string{"check", two}, 0, []string{"two.yaml: ok (2 providers, 2 models)\n"}, nil},
		{"every problem with its line", []string{"check", bad}, 1, nil, []string{
			"bad.yaml:5: models[0].providers[0].provider", "bad.yaml:7: retries.max_attempts", "bad.yaml:8: retries.max_roundz"}},
		{"missing file", []string{"check", filepath.Join(dir, "none.yaml")}, 1, nil, []string{"none.yaml"}},
		{"version", []string{"version"}, 0, []string{"switchboard"}, nil},
		{"unknown command", []string{"frobnicate"}, 2, nil, []string{"unknown command"}},
	})
}

func TestProductionRequiresToken(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\n"), 0o644)
	t.Setenv("SWITCHBOARD_ENV", "production")
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(errb.String(), "auth.token") {
		t.Fatalf("stderr: %s", errb.String())
	}
}

func TestJSONLogsCarryRequestIDs(t *testing.T) {
	cfg, err := config.Parse([]byte("providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\nlogging: {level: debug, format: json}\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	level := new(slog.LevelVar)
	srv := server.New(newLogger(&buf, cfg, level), nil, nil)
	srv.Apply(cfg)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	req, _ := http.NewRequest("GET", ts.URL+"/v1/models", nil)
	req.Header.Set("X-Request-Id", "trace-7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if level.Level() != slog.LevelDebug {
		t.Fatalf("level %v", level.Level())
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		if rec["msg"] == "request" && rec["request_id"] == "trace-7" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no request line with its id:\n%s", buf.String())
	}
}
