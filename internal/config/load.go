package config

import (
	"bytes"
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
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	c.Path = path
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
	}
	l.applyDefaults(c)
	l.queueDefaults(c)
	l.validate(c)
	l.validateQueue(c)
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
		l.syntaxErr(err)
		return nil, false
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		l.syntaxErr(err)
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

func (l *loader) syntaxErr(err error) {
	msg, line := err.Error(), 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	l.errs = append(l.errs, &FieldError{File: l.file, Line: line, Msg: msg})
}
