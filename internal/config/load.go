package config

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads, expands, decodes, defaults and validates the config file at
// path. Problems in the file come back together as *Errors; a read failure
// is returned as is (errors.Is(err, fs.ErrNotExist) works).
func Load(path string) (*Config, error) {
	data, err := ReadFile(path, MaxConfigBytes)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	c.Path = path
	c.Sum = sha256.Sum256(data)
	return c, nil
}

// Parse is Load for bytes already in memory; filename only labels errors.
// ${VAR} references are read from the process environment.
func Parse(data []byte, filename string) (*Config, error) {
	return parse(data, filename, os.LookupEnv)
}

func parse(data []byte, filename string, getenv func(string) (string, bool)) (*Config, error) {
	l := newLoader(filename, getenv)
	root, ok := l.document(data)
	if !ok {
		return nil, &l.errs
	}
	c := &Config{}
	if root != nil {
		l.lines[""] = root.Line
		l.walk(root, reflect.ValueOf(c).Elem(), "")
		if l.walked > maxValues {
			// What was left undecoded would only yield an error per
			// missing field (thousands of lines): the one error says it.
			return nil, &l.errs
		}
	}
	l.applyDefaults(c)
	routingDefaults(c)
	l.queueDefaults(c)
	l.usageLogDefaults(c)
	l.tracingDefaults(c)
	l.tagsDefaults(c)
	l.alertsDefaults(c)
	l.validate(c)
	l.validateQueue(c)
	l.validateUsageLog(c)
	l.validateTracing(c)
	l.validateTags(c)
	l.validateAlerts(c)
	if c.Config.UnknownFields == UnknownWarn {
		for _, e := range l.unknown {
			c.Warnings = append(c.Warnings, e.Error())
		}
	} else {
		l.errs = append(l.errs, l.unknown...)
	}
	if len(l.errs) > 0 {
		sort.SliceStable(l.errs, func(i, j int) bool { return l.errs[i].Line < l.errs[j].Line })
		return nil, &l.errs
	}
	c.Warnings = append(c.Warnings, l.warnings...)
	c.Warnings = append(c.Warnings, l.cloudWarnings(c)...)
	if w := noOperator(&c.Auth); w != "" {
		c.Warnings = append(c.Warnings, w)
	}
	c.models = make(map[string]*Model, len(c.Models))
	for _, m := range c.Models {
		c.models[m.Name] = m
	}
	return c, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document parses the YAML and returns its top node, nil for an empty file.
// ok is false on a syntax error, which leaves nothing to check further.
func (l *loader) document(data []byte) (root *yaml.Node, ok bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, true
		}
		l.syntaxErr(err, data)
		return nil, false
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		l.syntaxErr(err, nil)
		return nil, false
	default:
		l.errs = append(l.errs, &FieldError{File: l.file, Line: extra.Line, Msg: "only one YAML document is allowed"})
		return nil, false
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, true
	}
	return doc.Content[0], true
}

func (l *loader) syntaxErr(err error, data []byte) {
	msg, line := err.Error(), 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		line = badLine(data, line, msg)
		if msg == "did not find expected key" {
			msg += " (check this line's indentation against the keys above it)"
		}
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	l.errs = append(l.errs, &FieldError{File: l.file, Line: line, Msg: msg})
}

// maxBadLineSearch bounds the lines badLine re-parses (it is quadratic).
const maxBadLineSearch = 5000

// badLine finds the line a syntax error is really on. yaml.v3 reports some
// errors (a mis-indented key: "did not find expected key") at the line
// where the enclosing block began, which can be far above the mistake. The
// first prefix of the document, from the reported line on, that fails with
// the same message ends at the line to blame; reported is kept when none
// does (or the file is too long to search).
func badLine(data []byte, reported int, msg string) int {
	if len(data) == 0 || reported < 1 {
		return reported
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > maxBadLineSearch {
		return reported
	}
	for n := reported; n <= len(lines); n++ {
		var v yaml.Node
		err := yaml.Unmarshal(bytes.Join(lines[:n], nil), &v)
		if err == nil {
			continue
		}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil && m[2] == msg {
			return n
		}
	}
	return reported
}

// noOperator warns when gateway keys are configured but nobody may see the
// whole gateway: no admin key, no auth.token (the operator's key) and no
// auth.metrics_token, so /metrics and the providers' health are closed to
// everyone.
func noOperator(a *Auth) string {
	if !a.Enabled() || a.Token != "" || a.MetricsToken != "" || a.AdminToken != "" {
		return ""
	}
	for _, keys := range []map[string]*KeySpec{a.Keys, a.FileKeys} {
		for _, k := range keys {
			if k.Role == RoleAdmin {
				return ""
			}
		}
	}
	return "auth: no key has role: admin and auth.metrics_token and auth.admin_token are unset: /metrics, providers and traffic are visible to nobody " +
		"(give an operator's key role: admin, or set auth.metrics_token for Prometheus)"
}
