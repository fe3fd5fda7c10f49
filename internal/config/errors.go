package config

import (
	"fmt"
	"strings"

	"switchboard/internal/visible"
)

// FieldError is one problem in a config file, located by line and by the
// dotted path of the field, so an operator can jump straight to it.
type FieldError struct {
	File  string
	Line  int
	Field string // e.g. "retries.max_attempts", "models[1].providers[0].provider"; "" for file-level problems
	Msg   string
	// unset names the environment variables an unset-variable problem
	// refers to, for the one hint line of Errors.
	unset []string
}

// Error formats the problem as "file:line: field: message". A field path
// holds the file's own keys (a provider's or a tenant's name), so every
// control or invisible character in it is written as an escape: the line
// reaches a terminal (switchboard check) and must not drive it.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File == "" {
		b.WriteString("<config>")
	} else {
		b.WriteString(e.File)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return visible.Escape(b.String())
}

// Errors is every problem found in one config, in file order. Parse and Load
// return it (as *Errors) so a broken file is fixed in one pass, not one
// error per restart.
type Errors []*FieldError

// Error prints one problem per line; when some are unset environment
// variables, one last line says how to set them.
func (es Errors) Error() string {
	lines := make([]string, 0, len(es)+1)
	var unset []string
	seen := map[string]bool{}
	for _, e := range es {
		lines = append(lines, e.Error())
		for _, n := range e.unset {
			if !seen[n] {
				seen[n] = true
				unset = append(unset, n)
			}
		}
	}
	if len(unset) > 0 {
		lines = append(lines, unsetHint(unset))
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As reach the individual *FieldError values.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}
