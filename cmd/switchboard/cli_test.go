package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
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

// TestEveryCommandHelp: COMMAND --help (and -h) prints that command's
// usage to stdout and exits 0, the same way for every command and every
// word of queue; nothing falls through to the flag package's
// "Usage of ..." or runs the command.
func TestEveryCommandHelp(t *testing.T) {
	var cases [][]string
	for _, c := range commands {
		cases = append(cases, []string{c.name, "--help"}, []string{c.name, "-h"})
	}
	cases = append(cases,
		[]string{"queue", "dlq", "--help"}, []string{"queue", "stats", "--help"},
		[]string{"queue", "dlq", "list", "-h"}, []string{"queue", "dlq", "retry", "--help"})
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(args, &out, &errb); code != 0 {
				t.Fatalf("exit %d; stdout %q; stderr %q", code, out.String(), errb.String())
			}
			want := "usage: " + commandNamed(t, args[0]).usage[0]
			if !strings.HasPrefix(out.String(), want) {
				t.Errorf("stdout does not start with %q:\n%s", want, out.String())
			}
			if errb.Len() != 0 || strings.Contains(out.String(), "Usage of") {
				t.Errorf("stdout %q; stderr %q", out.String(), errb.String())
			}
		})
	}
	// help COMMAND is COMMAND --help.
	var viaHelp, direct, errb bytes.Buffer
	if run([]string{"help", "queue"}, &viaHelp, &errb) != 0 || run([]string{"queue", "--help"}, &direct, &errb) != 0 ||
		viaHelp.String() != direct.String() {
		t.Errorf("help queue:\n%s\nqueue --help:\n%s", viaHelp.String(), direct.String())
	}
	runCLICases(t, []cliCase{
		{"version --help is help, not the version", []string{"version", "--help"}, 0, []string{"usage: switchboard version"}, nil},
		{"version takes no words", []string{"version", "frob"}, 2, nil, []string{"takes no arguments", "usage: switchboard version"}},
		{"help of no command", []string{"help", "frob"}, 2, nil, []string{`no command "frob"`}},
		{"a bad flag: the error and the usage on stderr", []string{"check", "--nope"}, 2, nil,
			[]string{"flag provided but not defined: -nope", "usage: switchboard check"}},
	})
	var out bytes.Buffer
	run([]string{"version", "--help"}, &out, &errb)
	if strings.Contains(out.String(), buildInfo().String()) {
		t.Errorf("version --help printed the version:\n%s", out.String())
	}
}

// TestUsageNamesEveryFlag: each command's usage lines name every flag its
// flag set accepts, and name no flag it does not (--help and the
// top-level --version aside), so the usage cannot drift from the code.
func TestUsageNamesEveryFlag(t *testing.T) {
	defined := regexp.MustCompile(`(?m)^  -([\w-]+)`)
	named := regexp.MustCompile(`--([\w-]+)`)
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run([]string{c.name, "--help"}, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			_, defaults, _ := strings.Cut(out.String(), "\nflags:\n")
			usage := strings.Join(c.usage, "\n")
			flagSet := map[string]bool{}
			for _, m := range defined.FindAllStringSubmatch(defaults, -1) {
				flagSet[m[1]] = true
				if !strings.Contains(usage, "--"+m[1]+" ") && !strings.Contains(usage, "--"+m[1]+"]") {
					t.Errorf("flag --%s is missing from the usage %q", m[1], usage)
				}
			}
			for _, m := range named.FindAllStringSubmatch(usage, -1) {
				if !flagSet[m[1]] && m[1] != "help" && m[1] != "version" {
					t.Errorf("the usage names --%s, which %s does not accept", m[1], c.name)
				}
			}
		})
	}
}

func commandNamed(t *testing.T, name string) command {
	t.Helper()
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no command %q", name)
	return command{}
}

// TestVersionFromLdflags: a version and revision given with -ldflags are
// what the version line shows; without them, Go's build record is.
func TestVersionFromLdflags(t *testing.T) {
	if b := buildInfo(); b.version == "" || b.revision == "" || b.String() == "" {
		t.Fatalf("build info without ldflags: %+v", b)
	}
	oldV, oldR := version, revision
	t.Cleanup(func() { version, revision = oldV, oldR })
	version, revision = "1.2.3", "abc123"
	runCLICases(t, []cliCase{
		{"version", []string{"version"}, 0, []string{"switchboard 1.2.3 revision abc123"}, nil},
		{"--version", []string{"--version"}, 0, []string{"switchboard 1.2.3 revision abc123"}, nil},
	})
}
