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

// command is one subcommand: its synopsis and one line on what it does,
// for --help.
type command struct {
	name, synopsis, what string
}

var commands = []command{
	{"serve", "switchboard [serve] [--config FILE] [--listen ADDR] [--pprof ADDR]", "run the gateway (the default command)"},
	{"check", "switchboard check [--config FILE] CONFIG...", "validate config files: every problem as file:line: field: message, then warnings"},
	{"prices", "switchboard prices [--config FILE]", "print the effective pricing table (catalog + config overrides)"},
	{"queue", "switchboard queue stats | dlq list|show ID|retry ID|drop ID [--config FILE]", "inspect the shared job queue (queue.mode: redis)"},
	{"healthcheck", "switchboard healthcheck [--url URL]", "exit 0 when the gateway's /health answers 200 (the image's HEALTHCHECK)"},
	{"version", "switchboard version | --version", "print the version, VCS revision and Go version"},
	{"help", "switchboard help | --help", "print this help"},
}

// usageText lists every subcommand with one line each.
func usageText() string {
	var b strings.Builder
	b.WriteString("Switchboard: one OpenAI-compatible endpoint in front of many LLM providers.\n\nusage:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %s\n      %s\n", c.synopsis, c.what)
	}
	b.WriteString("\nTry it without API keys: switchboard --config examples/demo.yaml\n")
	b.WriteString("Environment: CONFIG_FILE, PORT, BIND, STATE_DIR, SWITCHBOARD_ENV, SWITCHBOARD_REDIS_URL (see the README).")
	return b.String()
}

// synopsis returns a subcommand's usage line.
func synopsis(name string) string {
	for _, c := range commands {
		if c.name == name {
			return "usage: " + c.synopsis + "\n  " + c.what
		}
	}
	return ""
}

// flagSet is a subcommand's flag set whose -h/--help prints the same
// usage line as --help, then the flags, to stdout.
func flagSet(name string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stdout, synopsis(name))
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	return fs
}

// parseExit is the exit code of a failed flag parse: 0 for -h/--help
// (usage printed), 2 otherwise.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// versionString is the build's version: the one set by -ldflags when
// given (the image), else the module version and VCS revision Go recorded
// in the binary.
func versionString() string {
	v, rev, dirty, goVer := version, revision, false, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVer = bi.GoVersion
		if v == "dev" && bi.Main.Version != "" {
			v = bi.Main.Version // "(devel)" for a build from a checkout
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "unknown" {
					rev = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	out := "switchboard " + v + " revision " + rev
	if dirty {
		out += " (modified)"
	}
	if goVer != "" {
		out += " " + goVer
	}
	return out
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
