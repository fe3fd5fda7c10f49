package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// loader holds the state of one Parse: where each field was found and every
// problem so far. The typed walk below replaces yaml's own decoding because
// that cannot reject unknown keys on a Node, and because its errors carry a
// line but not the field.
type loader struct {
	file   string
	getenv func(string) (string, bool)
	errs   Errors

	lines map[string]int        // field path → line of its key (or list item)
	nodes map[string]*yaml.Node // field path → value node, after aliases
	bad   map[string]bool       // paths that failed to decode; validation skips them
	// expanded records scalars already expanded (aliases share nodes) and
	// whether that succeeded.
	expanded map[*yaml.Node]bool
	// secret marks map fields whose keys are secrets (tag option
	// ",secret"); their entries are labelled path[#N], never by key.
	secret map[string]bool
	// labels maps a secret map's path and key to the entry's label.
	labels map[string]map[string]string
	// unknown holds unknown-field problems until config.unknown_fields is
	// known.
	unknown Errors
	// warnings are problems that do not stop the load (Config.Warnings).
	warnings []string
	// walked counts the values decoded, aliases expanded: a few KB of
	// nested aliases would otherwise expand to billions (see maxValues).
	walked int
}

// maxValues bounds the values one config may expand to through aliases;
// real configs have a few thousand, a large one tens of thousands.
const maxValues = 100_000

func newLoader(file string, getenv func(string) (string, bool)) *loader {
	return &loader{
		file:     file,
		getenv:   getenv,
		lines:    map[string]int{},
		nodes:    map[string]*yaml.Node{},
		bad:      map[string]bool{},
		expanded: map[*yaml.Node]bool{},
		secret:   map[string]bool{},
		labels:   map[string]map[string]string{},
	}
}

// label returns the field path of the entry key of the map at path: the
// key itself, or its position for a secret map.
func (l *loader) label(path, key string) string {
	if m := l.labels[path]; m != nil {
		if lb, ok := m[key]; ok {
			return lb
		}
	}
	return join(path, key)
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// decodeErr records a problem found while decoding the node at path and
// marks the path so validation does not report it a second time.
func (l *loader) decodeErr(line int, path, format string, args ...any) {
	l.bad[path] = true
	if secretField(path) {
		// The message may quote the value (got "..."): a secret one says
		// only what kind of value it was.
		for i, a := range args {
			if s, ok := a.(string); ok && strings.ContainsRune(s, '"') {
				args[i] = "a value (not shown: the field is secret)"
			}
		}
	}
	l.errs = append(l.errs, &FieldError{File: l.file, Line: line, Field: path, Msg: fmt.Sprintf(format, args...)})
}

// errAt records a validation problem at path, located at the path's own line
// or, when the field was omitted, at the nearest parent's.
func (l *loader) errAt(path, format string, args ...any) {
	for p := path; ; p = parent(p) {
		if l.bad[p] {
			return
		}
		if p == "" {
			break
		}
	}
	l.errs = append(l.errs, &FieldError{File: l.file, Line: l.lineOf(path), Field: path, Msg: fmt.Sprintf(format, args...)})
}

func (l *loader) lineOf(path string) int {
	for p := path; ; p = parent(p) {
		if line, ok := l.lines[p]; ok {
			return line
		}
		if p == "" {
			return 1
		}
	}
}

// has reports whether the file gave path a non-null value; defaults apply
// otherwise.
func (l *loader) has(path string) bool {
	n, ok := l.nodes[path]
	return ok && !isNull(n)
}

// parent strips the last ".name" or "[i]" from a field path.
func parent(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// expand substitutes environment variables in a scalar once. A plain scalar
// that changed gets its tag cleared so "${N:-3}" resolves as an int; quoted
// or explicitly tagged scalars keep theirs, so "${N}" stays a string.
func (l *loader) expand(n *yaml.Node, path string) bool {
	if ok, done := l.expanded[n]; done {
		return ok
	}
	v, err := expandEnv(n.Value, l.getenv)
	if err != nil {
		l.expanded[n] = false
		l.decodeErr(n.Line, path, "%s", err.Error())
		var uv *unsetVars
		if errors.As(err, &uv) && len(l.errs) > 0 {
			l.errs[len(l.errs)-1].unset = uv.names
		}
		return false
	}
	l.expanded[n] = true
	if v != n.Value {
		n.Value = v
		if n.Style&(yaml.TaggedStyle|yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			n.Tag = ""
		}
	}
	return true
}

// walk decodes n into v, recording field positions on the way.
func (l *loader) walk(n *yaml.Node, v reflect.Value, path string) {
	n = deref(n)
	if l.walked++; l.walked > maxValues {
		if l.walked == maxValues+1 {
			l.decodeErr(n.Line, path, "the file expands to more than %d values (its own and those aliases, *name, repeat); refusing it", maxValues)
		}
		return
	}
	if n.Kind == yaml.ScalarNode && !l.expand(n, path) {
		return
	}
	if isNull(n) {
		return // omitted: zero value now, default later
	}
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			l.decodeErr(n.Line, path, "%v", err)
			return
		}
		l.noteUnitless(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		l.walk(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		l.walkStruct(n, v, path)
	case reflect.Map:
		l.walkMap(n, v, path)
	case reflect.Slice:
		l.walkSlice(n, v, path)
	default:
		l.scalar(n, v, path)
	}
}

type pair struct{ key, val *yaml.Node }

// pairs lists a mapping's entries with "<<" merge keys resolved: merged
// entries first, each overridden by an explicit key of the same name.
func (l *loader) pairs(n *yaml.Node, path string) []pair {
	var explicit, merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge" {
			merged = append(merged, l.mergeSources(deref(v), path)...)
			continue
		}
		explicit = append(explicit, pair{k, v})
	}
	if len(merged) == 0 {
		return explicit
	}
	taken := map[string]bool{}
	for _, p := range explicit {
		taken[p.key.Value] = true
	}
	var out []pair
	for _, p := range merged {
		if !taken[p.key.Value] {
			taken[p.key.Value] = true
			out = append(out, p)
		}
	}
	return append(out, explicit...)
}

func (l *loader) mergeSources(v *yaml.Node, path string) []pair {
	switch v.Kind {
	case yaml.MappingNode:
		return l.pairs(v, path)
	case yaml.SequenceNode:
		var out []pair
		for _, s := range v.Content {
			s = deref(s)
			if s.Kind != yaml.MappingNode {
				l.decodeErr(s.Line, path, "merge (<<) wants mappings, got %s", describe(s))
				continue
			}
			out = append(out, l.pairs(s, path)...)
		}
		return out
	}
	l.decodeErr(v.Line, path, "merge (<<) wants a mapping, got %s", describe(v))
	return nil
}

// fieldsOf maps yaml names to field indexes, keeping declaration order for
// the "unknown field" hint.
func fieldsOf(t reflect.Type) (map[string]int, []string) {
	idx := map[string]int{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		idx[name] = i
		names = append(names, name)
	}
	return idx, names
}

func (l *loader) walkStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		l.decodeErr(n.Line, path, "want a mapping, got %s", describe(n))
		return
	}
	idx, names := fieldsOf(v.Type())
	seen := map[string]int{}
	for _, p := range l.pairs(n, path) {
		if p.key.Kind != yaml.ScalarNode {
			l.decodeErr(p.key.Line, path, "keys must be plain names, got %s", describe(p.key))
			continue
		}
		name := p.key.Value
		fp := join(path, name)
		if first, dup := seen[name]; dup {
			l.decodeErr(p.key.Line, fp, "duplicate key (first at line %d)", first)
			continue
		}
		seen[name] = p.key.Line
		i, ok := idx[name]
		if !ok {
			// Held apart until the whole file is read: config.unknown_fields
			// decides whether these are errors or warnings.
			l.bad[fp] = true
			l.unknown = append(l.unknown, &FieldError{File: l.file, Line: p.key.Line, Field: fp,
				Msg: fmt.Sprintf("unknown field (known: %s)", strings.Join(names, ", "))})
			continue
		}
		l.lines[fp] = p.key.Line
		l.nodes[fp] = deref(p.val)
		if _, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); opts == "secret" {
			l.secret[fp] = true
		}
		l.walk(p.val, v.Field(i), fp)
	}
}

func (l *loader) walkMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		l.decodeErr(n.Line, path, "want a mapping, got %s", describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	et := v.Type().Elem()
	seen := map[string]int{}
	secret := l.secret[path]
	for i, p := range l.pairs(n, path) {
		if p.key.Kind != yaml.ScalarNode {
			l.decodeErr(p.key.Line, path, "keys must be plain names, got %s", describe(p.key))
			continue
		}
		name := p.key.Value
		fp := join(path, name)
		if secret {
			// Secret keys may come from the environment and must never
			// appear in a message: label the entry by its position.
			fp = fmt.Sprintf("%s[#%d]", path, i+1)
			if !l.expand(p.key, fp) {
				continue
			}
			name = p.key.Value
			if l.labels[path] == nil {
				l.labels[path] = map[string]string{}
			}
			if _, dup := seen[name]; !dup {
				l.labels[path][name] = fp
			}
		}
		if first, dup := seen[name]; dup {
			l.decodeErr(p.key.Line, fp, "duplicate key (first at line %d)", first)
			continue
		}
		seen[name] = p.key.Line
		l.lines[fp] = p.key.Line
		l.nodes[fp] = deref(p.val)
		v.SetMapIndex(reflect.ValueOf(name), l.elem(p.val, et, fp))
	}
}

func (l *loader) walkSlice(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		l.decodeErr(n.Line, path, "want a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), 0, len(n.Content))
	for i, item := range n.Content {
		fp := fmt.Sprintf("%s[%d]", path, i)
		l.lines[fp] = item.Line
		l.nodes[fp] = deref(item)
		s = reflect.Append(s, l.elem(item, v.Type().Elem(), fp))
	}
	v.Set(s)
}

// elem decodes one map value or list item. Pointer elements are always
// allocated, so an empty entry ("- ") is validated as empty rather than
// leaving a nil for the rest of the program to trip on.
func (l *loader) elem(n *yaml.Node, t reflect.Type, path string) reflect.Value {
	e := reflect.New(t).Elem()
	target := e
	if t.Kind() == reflect.Pointer {
		e.Set(reflect.New(t.Elem()))
		target = e.Elem()
	}
	l.walk(n, target, path)
	return e
}

// scalar decodes a leaf. Integers must be whole numbers (yaml alone would
// truncate 2.5 to 2) and booleans must be true or false.
func (l *loader) scalar(n *yaml.Node, v reflect.Value, path string) {
	want := map[reflect.Kind]string{reflect.String: "a string", reflect.Bool: "true or false",
		reflect.Float64: "a number", reflect.Float32: "a number"}[v.Kind()]
	if want == "" {
		want = "an integer"
	}
	fail := func() {
		got := describe(n)
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && v.Kind() != reflect.String {
			if _, err := strconv.ParseFloat(n.Value, 64); err == nil || n.Value == "true" || n.Value == "false" {
				got += " (a quoted string; remove the quotes)"
			}
		}
		l.decodeErr(n.Line, path, "want %s, got %s", want, got)
	}
	if n.Kind != yaml.ScalarNode {
		fail()
		return
	}
	if v.Kind() == reflect.String {
		v.SetString(n.Value)
		return
	}
	var x any
	if err := n.Decode(&x); err != nil {
		fail()
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		b, ok := x.(bool)
		if !ok {
			fail()
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		switch x := x.(type) {
		case int:
			i = int64(x)
		case int64:
			i = x
		case uint64:
			l.decodeErr(n.Line, path, "%d is too large", x)
			return
		case float64:
			if x != math.Trunc(x) || math.Abs(x) >= math.MaxInt64 {
				fail()
				return
			}
			i = int64(x)
		default:
			fail()
			return
		}
		if v.OverflowInt(i) {
			l.decodeErr(n.Line, path, "%d is too large", i)
			return
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		var f float64
		switch x := x.(type) {
		case int:
			f = float64(x)
		case int64:
			f = float64(x)
		case uint64:
			f = float64(x)
		case float64:
			f = x
		default:
			fail()
			return
		}
		v.SetFloat(f)
	default:
		// Only reachable if types.go gains a kind this walk does not know.
		l.decodeErr(n.Line, path, "cannot decode into %s", v.Type())
	}
}

// secretField reports whether the field at path holds a secret or may: an
// API key, a token, a password-bearing URL, a header value (often
// Authorization), a gateway key. Messages never quote such values.
func secretField(path string) bool {
	if strings.Contains(path, ".headers.") {
		return true
	}
	if rest, ok := strings.CutPrefix(path, "auth.keys"); ok {
		// The key itself is secret and its entry is named by position
		// (auth.keys[#2]); the limits under it (rpm, tenant, ...) are not,
		// and their bad values are shown like any other field's.
		return !strings.Contains(rest, "].")
	}
	for strings.HasSuffix(path, "]") {
		path = parent(path)
	}
	name := path[strings.LastIndexByte(path, '.')+1:]
	switch name {
	case "api_key", "api_keys", "token", "metrics_token", "admin_token", "password", "url", "base_url":
		return true
	}
	return strings.Contains(name, "secret") || strings.Contains(name, "token") || strings.Contains(name, "password")
}
