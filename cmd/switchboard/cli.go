package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"runtime/debug"
	"strings"
)

// command is one subcommand: its usage lines (every flag it accepts; a
// test holds them to its flag set) and one line on what it does, for
// --help.
type command struct {
	name  string
	usage []string
	what  string
}

var commands = []command{
	{"serve", []string{"switchboard [serve] [--config FILE] [--listen ADDR] [--role ROLE] [--pprof ADDR]"},
		"run the gateway (the default command); --role: ingress, worker or all (with queue.mode: redis)"},
	{"check", []string{"switchboard check [--config FILE] CONFIG..."},
		"validate config files: every problem as file:line: field: message, then warnings"},
	{"prices", []string{"switchboard prices [--config FILE]"},
		"print the effective pricing table (catalog + config overrides)"},
	{"queue", []string{
		"switchboard queue stats [--config FILE]",
		"switchboard queue dlq list [--limit N] [--config FILE]",
		"switchboard queue dlq show|retry|drop ID [--config FILE]"},
		"inspect the shared job queue (queue.mode: redis)"},
	{"usage", []string{
		"switchboard usage [summary] [--group-by DIMS] [FILTERS] [--format table|csv|jsonl|json] [SOURCE]",
		"switchboard usage requests [FILTERS] [--limit N] [--cursor C] [--format table|csv|jsonl|json] [SOURCE]",
		"  FILTERS: [--from T] [--to T] [--tenant T] [--key-id ID] [--model M] [--served-model M] [--provider P] [--status S] [--tag K:V]",
		"  SOURCE: [--db FILE | --state-dir DIR | --config FILE] or --url URL [--key KEY]"},
		"query the usage log: sums of requests, tokens and cost, or the requests themselves; from its file or a gateway's admin API"},
	{"healthcheck", []string{"switchboard healthcheck [--url URL] [--timeout DURATION]"},
		"exit 0 when the gateway's /health answers 200 (the image's HEALTHCHECK)"},
	{"version", []string{"switchboard version | --version"},
		"print the version, VCS revision and Go version"},
	{"help", []string{"switchboard help [COMMAND] | --help"},
		"print this help, or one command's usage and flags"},
}

// usageText lists every subcommand with one line each.
func usageText() string {
	var b strings.Builder
	b.WriteString("Switchboard: one OpenAI-compatible endpoint in front of many LLM providers.\n\nusage:\n")
	for _, c := range commands {
		for _, u := range c.usage {
			fmt.Fprintf(&b, "  %s\n", u)
		}
		fmt.Fprintf(&b, "      %s\n", c.what)
	}
	b.WriteString("\nswitchboard COMMAND --help prints one command's flags.\n")
	b.WriteString("Try it without API keys: switchboard --config examples/demo.yaml\n")
	b.WriteString("Environment: CONFIG_FILE, PORT, BIND, STATE_DIR, SWITCHBOARD_ENV, SWITCHBOARD_REDIS_URL (see the README).")
	return b.String()
}

// synopsis returns a subcommand's usage lines and what it does.
func synopsis(name string) string {
	for _, c := range commands {
		if c.name == name {
			return "usage: " + strings.Join(c.usage, "\n       ") + "\n  " + c.what
		}
	}
	return ""
}

// flags is a subcommand's flag set. Its --help prints the command's usage
// lines and flags to stdout (exit 0); a bad flag prints the error and the
// same to stderr (exit 2). Every subcommand parses through it, so their
// help looks and exits alike.
type flags struct {
	*flag.FlagSet
	stdout, stderr io.Writer
}

func flagSet(name string, stdout, stderr io.Writer) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr) // the flag package's own error line
	fs.Usage = func() {} // parse prints the usage, to the right stream
	return &flags{FlagSet: fs, stdout: stdout, stderr: stderr}
}

// given reports whether the flag name was set on the command line.
func (f *flags) given(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// parse parses args; ok=false: the command ends with code.
func (f *flags) parse(args []string) (code int, ok bool) {
	err := f.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		f.usage(f.stdout)
		return 0, false
	default:
		f.usage(f.stderr)
		return 2, false
	}
}

// usage prints the command's usage lines, then its flags, if any.
func (f *flags) usage(w io.Writer) {
	fmt.Fprintln(w, synopsis(f.Name()))
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "flags:")
	f.SetOutput(w)
	f.PrintDefaults()
	f.SetOutput(f.stderr)
}

// parseWords parses flags that may come before, between or after the
// command's words, and returns the words.
func (f *flags) parseWords(args []string) (words []string, code int, ok bool) {
	for len(args) > 0 {
		if code, ok := f.parse(args); !ok {
			return nil, code, false
		}
		args = f.Args()
		if len(args) > 0 {
			words, args = append(words, args[0]), args[1:]
		}
	}
	return words, 0, true
}

// noArgs refuses words after a command that takes none.
func (f *flags) noArgs() (code int, ok bool) {
	if f.NArg() == 0 {
		return 0, true
	}
	fmt.Fprintf(f.stderr, "%s takes no arguments (got %q)\n", f.Name(), f.Args())
	f.usage(f.stderr)
	return 2, false
}

// build is what the binary knows of its own build: the one source of the
// version that `switchboard version` prints and the startup log reports.
type build struct {
	version, revision, goVersion string
	modified                     bool
}

// version and revision are set at build time with
// -ldflags "-X main.version=... -X main.revision=..." (the Dockerfile's
// VERSION and REVISION build args); unset, the module version and VCS
// revision Go recorded in the binary stand in.
var version, revision string

// buildInfo returns this binary's build: the -ldflags values when given,
// else what Go recorded ("(devel)" for a build from a checkout).
func buildInfo() build {
	b := build{version: version, revision: revision}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b.goVersion = bi.GoVersion
		if b.version == "" {
			b.version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.revision == "" {
					b.revision = s.Value
				}
			case "vcs.modified":
				b.modified = s.Value == "true"
			}
		}
	}
	if b.version == "" {
		b.version = "(devel)"
	}
	if b.revision == "" {
		b.revision = "unknown"
	}
	return b
}

// String is the line `switchboard version` prints.
func (b build) String() string {
	out := "switchboard " + b.version + " revision " + b.revision
	if b.modified {
		out += " (modified)"
	}
	if b.goVersion != "" {
		out += " " + b.goVersion
	}
	return out
}

// plural is n and the noun, pluralised by an s when n is not 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// missingConfig explains a default config file that is not there: which
// file was looked for, and how to start the demo.
func missingConfig(path string, explicit bool, err error) string {
	if !errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	var b strings.Builder
	if explicit {
		fmt.Fprintf(&b, "no config file at %s.\n", path)
	} else {
		fmt.Fprintf(&b, "no config file at %s (the default; pass --config FILE or set CONFIG_FILE).\n", path)
	}
	b.WriteString("To try the gateway with built-in mock providers and no API keys:\n")
	b.WriteString("  switchboard --config examples/demo.yaml   (from a checkout: go run ./cmd/switchboard --config examples/demo.yaml)\n")
	b.WriteString("For real providers start from examples/config.yaml; switchboard --help lists the commands.")
	return b.String()
}
