package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestProductionEnv(t *testing.T) {
	tests := []struct {
		env  map[string]string
		on   bool
		name string
	}{
		{nil, false, ""},
		{map[string]string{"RACK_ENV": "production"}, true, "RACK_ENV"},
		{map[string]string{"RACK_ENV": "development"}, false, "RACK_ENV"},
		{map[string]string{"SWITCHBOARD_ENV": "Production"}, true, "SWITCHBOARD_ENV"},
		// Switchboard's own variable decides when both are set.
		{map[string]string{"SWITCHBOARD_ENV": "development", "RACK_ENV": "production"}, false, "SWITCHBOARD_ENV"},
	}
	for _, tt := range tests {
		on, name := productionEnv(envMap(tt.env))
		if on != tt.on || name != tt.name {
			t.Errorf("%v: got %v %q, want %v %q", tt.env, on, name, tt.on, tt.name)
		}
	}
}

func TestListenDefault(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
		err  bool
	}{
		{nil, "0.0.0.0", false},
		{map[string]string{"BIND": "127.0.0.1"}, "127.0.0.1", false},
		{map[string]string{"PUMA_BIND": "tcp://0.0.0.0"}, "0.0.0.0", false},
		{map[string]string{"PUMA_BIND": "tcp://127.0.0.1:9292?backlog=1024"}, "127.0.0.1:9292", false},
		{map[string]string{"PUMA_BIND": "tcp://[::1]:9292"}, "[::1]:9292", false},
		{map[string]string{"BIND": "10.0.0.1", "PUMA_BIND": "tcp://0.0.0.0"}, "10.0.0.1", false},
		{map[string]string{"PUMA_BIND": "unix:///tmp/puma.sock"}, "", true},
	}
	for _, tt := range tests {
		got, err := listenDefault(envMap(tt.env))
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("%v: got %q, %v", tt.env, got, err)
		}
	}
}

func TestIgnoredPuma(t *testing.T) {
	got := ignoredPuma([]string{"PATH=/bin", "PUMA_MAX_THREADS=32", "PUMA_BIND=tcp://0.0.0.0", "PUMA_MIN_THREADS=1", "PUMA_WORKERS=2"})
	want := []string{"PUMA_MAX_THREADS", "PUMA_MIN_THREADS", "PUMA_WORKERS"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
}

// TestRackEnvProductionRequiresToken: the LLM Proxy image's RACK_ENV=production
// refuses an open gateway, as SWITCHBOARD_ENV=production does.
func TestRackEnvProductionRequiresToken(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\n"), 0o644)
	t.Setenv("SWITCHBOARD_ENV", "")
	t.Setenv("RACK_ENV", "production")
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(errb.String(), "RACK_ENV=production requires auth.token") {
		t.Fatalf("stderr: %s", errb.String())
	}
}

// TestCheckPrintsUnknownFieldWarnings: under config.unknown_fields: warn a
// migrated file passes check, and check names what it ignores.
func TestCheckPrintsUnknownFieldWarnings(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("config: {unknown_fields: warn}\nproviders:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\npuma: {threads: 16}\n"), 0o644)
	var out, errb bytes.Buffer
	if code := run([]string{"check", cfg}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "warning: "+cfg+":7: puma: unknown field") {
		t.Fatalf("stdout: %s", out.String())
	}
}
