package config

import (
	"fmt"
	"strings"
)

// FieldError is one problem in a config file, located by line and by the
// dotted path of the field, so an operator can jump straight to it.
type FieldError struct {
	File  string
	Line  int
	Field string // e.g. "retries.max_attempts", "models[1].providers[0].provider"; "" for file-level problems
	Msg   string
}

// Error formats the problem as "file:line: field: message".
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
	return b.String()
}

// Errors is every problem found in one config, in file order. Parse and Load
// return it (as *Errors) so a broken file is fixed in one pass, not one
// error per restart.
type Errors []*FieldError

// Error prints one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
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
