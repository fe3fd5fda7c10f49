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
  metrics_token: scrape
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

// TestCLIHelpVersionAndCheck runs the CLI as a user would.
func TestCLIHelpVersionAndCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("providers:\n  a: {type: mock}\nmodels:\n  - name: m\n    providers: [{provider: a}]\n"), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("providers:\n  a:\n    type: mock\n   base_url: x\nmodels: []\n"), 0o644)
	unset := filepath.Join(dir, "unset.yaml")
	os.WriteFile(unset, []byte("providers:\n  a:\n    base_url: http://x/v1\n    api_key: ${SB_TEST_UNSET_A}\n  b:\n    base_url: http://x/v1\n    api_key: ${SB_TEST_UNSET_B}\nmodels:\n  - name: m\n    providers: [{provider: a}, {provider: b}]\n"), 0o644)

	runCLICases(t, []cliCase{
		{"--help lists every command", []string{"--help"}, 0, []string{"switchboard check [--config FILE] CONFIG...", "switchboard prices", "switchboard healthcheck", "switchboard version", "examples/demo.yaml"}, nil},
		{"-h", []string{"-h"}, 0, []string{"usage:"}, nil},
		{"help", []string{"help"}, 0, []string{"usage:", "run the gateway"}, nil},
		{"--version", []string{"--version"}, 0, []string{"switchboard ", "revision ", "go1."}, nil},
		{"version", []string{"version"}, 0, []string{"switchboard ", "revision "}, nil},
		{"check --help matches --help", []string{"check", "--help"}, 0, []string{"usage: switchboard check [--config FILE] CONFIG...", "-config"}, nil},
		{"check two files", []string{"check", good, bad}, 1, []string{"good.yaml: ok"},
			[]string{"bad.yaml:4: did not find expected key"}},
		{"unset variables: one line of advice", []string{"check", unset}, 1, nil,
			[]string{"unset.yaml:4: providers.a.api_key: environment variable SB_TEST_UNSET_A is not set",
				"2 environment variable(s) unset (SB_TEST_UNSET_A, SB_TEST_UNSET_B): export them", "${SB_TEST_UNSET_A:-default}"}},
	})
	// The hint is one line, after the per-field lines.
	var out, errb bytes.Buffer
	run([]string{"check", unset}, &out, &errb)
	if n := strings.Count(errb.String(), "export them"); n != 1 {
		t.Errorf("advice printed %d times:\n%s", n, errb.String())
	}
}

// TestBareSwitchboardWithoutConfig: with no config file, the gateway says
// which file it looked for and how to start the demo.
func TestBareSwitchboardWithoutConfig(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("CONFIG_FILE", "")
	var out, errb bytes.Buffer
	if code := run(nil, &out, &errb); code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, s := range []string{"no config file at config/config.yaml (the default", "CONFIG_FILE", "switchboard --config examples/demo.yaml"} {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("stderr lacks %q:\n%s", s, errb.String())
		}
	}
}

// cliCase is one run of the CLI and what it must print.
type cliCase struct {
	name   string
	args   []string
	code   int
	stdout []string
	stderr []string
}

func runCLICases(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tc.args, &out, &errb); code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %s; stderr %s", code, tc.code, out.String(), errb.String())
			}
			for _, s := range tc.stdout {
				if !strings.Contains(out.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errb.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, errb.String())
				}
			}
		})
	}
}
