package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"switchboard/internal/store/redistest"
)

// checkFile runs `switchboard check` on yaml written to a file.
func checkFile(t *testing.T, yaml string) (code int, stdout, stderr string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code = run([]string{"check", path}, &out, &errb)
	return code, out.String(), errb.String()
}

// A config or keys file that names something endless (a symlink to
// /dev/zero) is refused at a bound; it must not grow the process.
func TestCheckEndlessFiles(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.Symlink("/dev/zero", cfg); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "keys.yaml")
	if err := os.WriteFile(keys, []byte("providers:\n  m: {type: mock}\nmodels:\n  - name: c\n    providers: [{provider: m}]\nauth: {keys_file: zero.json}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.json")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{cfg, keys} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var out, errb bytes.Buffer
		if code := run([]string{"check", path}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "larger than") {
			t.Fatalf("check %s: exit %d, %s", filepath.Base(path), code, errb.String())
		}
		runtime.ReadMemStats(&after)
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<30 { // the bound and io.ReadAll's doubling; unbounded, the process ran out of memory
			t.Errorf("check %s allocated %d MiB", filepath.Base(path), grown>>20)
		}
	}
}

// Every field path check prints has its control characters escaped: a
// provider named with a terminal escape cannot clear or recolour the
// operator's screen, in an error or a warning.
func TestCheckEscapesFieldPaths(t *testing.T) {
	code, _, stderr := checkFile(t, "providers:\n  \"m\\e[2J\\rx\":\n    type: mock\n    typo: 1\nmodels:\n  - name: c\n    providers: [{provider: \"m\\e[2J\\rx\"}]\n")
	if code != 1 || !strings.Contains(stderr, `providers.m\x1b[2J\x0dx.typo`) {
		t.Fatalf("exit %d:\n%q", code, stderr)
	}
	code, stdout, _ := checkFile(t, "config: {unknown_fields: warn}\nproviders:\n  \"a\\e]0;pwned\\a\":\n    type: mock\n    typo: 1\nmodels:\n  - name: c\n    providers: [{provider: \"a\\e]0;pwned\\a\"}]\n")
	if code != 0 || !strings.Contains(stdout, `a\x1b]0;pwned\x07`) {
		t.Fatalf("exit %d:\n%q", code, stdout)
	}
	for _, s := range []string{stderr, stdout} {
		if strings.ContainsAny(s, "\x1b\r\a") {
			t.Errorf("a control character reached the terminal: %q", s)
		}
	}
}

// The smaller frictions of check: a non-secret field's bad value is shown
// (in the config and in the keys file), a duration without a unit is named
// in a warning, an anthropic or gemini base_url without its version path
// gets one.
func TestCheckFrictions(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keys.json"), []byte(`{"sk-file-key-0123456789abcdef": {"tenant": "f", "rpm": "60"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.yaml")
	bad := "providers:\n  m: {type: mock}\nmodels:\n  - name: c\n    providers: [{provider: m}]\n" +
		"auth:\n  keys_file: keys.json\n  keys:\n    sk-inline-key-0123456789abcdef: {tenant: t, rpm: \"60\"}\n"
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	run([]string{"check", path}, &out, &errb)
	for _, want := range []string{`auth.keys[#1].rpm: want an integer, got "60"`, `auth.keys_file[#1]: rpm: want an integer, got "60"`} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("missing %q in:\n%s", want, errb.String())
		}
	}
	for _, secret := range []string{"sk-inline-key", "sk-file-key"} {
		if strings.Contains(errb.String(), secret) {
			t.Errorf("a key was printed:\n%s", errb.String())
		}
	}

	code, stdout, stderr := checkFile(t, `providers:
  a: {type: anthropic, base_url: "https://api.anthropic.com", api_key: x}
  b: {type: anthropic, base_url: "https://api.anthropic.com/v1/", api_key: x}
  g: {type: gemini, base_url: "https://generativelanguage.googleapis.com", api_key: x}
  h: {type: gemini, base_url: "https://generativelanguage.googleapis.com/v1beta", api_key: x}
models:
  - name: c
    hedge: {after: 400}
    ttft_timeout: 15
    providers: [{provider: a}, {provider: b}, {provider: g}, {provider: h}]
timeouts: {read: 300, request: 600s}
`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"models[0].hedge.after: 400 has no unit and is read as seconds (6m40s)",
		"providers.a.base_url: type anthropic: the base_url normally ends with the API's version path",
		"providers.g.base_url: type gemini: the base_url normally ends with the API's version path",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("missing warning %q in:\n%s", want, stdout)
		}
	}
	// LLM Proxy's fields are in seconds by definition; versioned URLs are fine.
	for _, quiet := range []string{"ttft_timeout", "timeouts.read", "providers.b.", "providers.h.", "timeouts.request"} {
		if strings.Contains(stdout, quiet) {
			t.Errorf("a warning about %s:\n%s", quiet, stdout)
		}
	}
}

// `switchboard queue stats` works from SWITCHBOARD_REDIS_URL alone when no
// config file is at hand; a config named but missing is still an error.
func TestQueueStatsFromTheEnvironment(t *testing.T) {
	srv := redistest.Start(t)
	t.Chdir(t.TempDir()) // no config/config.yaml here
	t.Setenv("CONFIG_FILE", "")
	t.Setenv("SWITCHBOARD_REDIS_URL", srv.URL)
	var out, errb bytes.Buffer
	if code := run([]string{"queue", "stats"}, &out, &errb); code != 0 || !strings.Contains(out.String(), `"waiting"`) {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"queue", "stats", "--config", "missing.yaml"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "missing.yaml") {
		t.Fatalf("a named config that is missing: exit %d: %s", code, errb.String())
	}
	t.Setenv("SWITCHBOARD_REDIS_URL", "")
	if code := run([]string{"queue", "stats"}, &out, &errb); code != 1 {
		t.Fatalf("neither a config nor the variable: exit %d", code)
	}
}
