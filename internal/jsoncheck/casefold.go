package jsoncheck

import (
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Fields is a compiled set of member names that a reader looks up in a
// JSON object, each with the Fields of the object (or of each object in
// the array) under it when the reader looks inside that too.
type Fields struct{ byFold map[string]member }

type member struct {
	name string
	sub  *Fields
}

// NewFields compiles names.
func NewFields(names ...string) *Fields {
	f := &Fields{byFold: make(map[string]member, len(names))}
	for _, n := range names {
		f.byFold[fold(n)] = member{name: n}
	}
	return f
}

// Add adds names not in f yet (a name already there keeps its nesting);
// it returns f.
func (f *Fields) Add(names ...string) *Fields {
	for _, n := range names {
		if _, ok := f.byFold[fold(n)]; !ok {
			f.byFold[fold(n)] = member{name: n}
		}
	}
	return f
}

// Nest makes sub the fields of the value of name (added if new); it
// returns f. sub may be f itself or an ancestor (nested blocks).
func (f *Fields) Nest(name string, sub *Fields) *Fields {
	f.byFold[fold(name)] = member{name: name, sub: sub}
	return f
}

// CaseVariant finds a member whose name differs from one of f's only by
// case, in v (an object or an array of objects) and under it as f nests.
// encoding/json matches names that way (preferring an exact match, the
// last of several case variants winning otherwise), and so do the many
// upstreams written in Go (Ollama, LocalAI): {"model": "a", "MODEL": "b"}
// is model "a" to a case-sensitive reader and "b" to them. path is where
// the member is (dotted, array elements by index), want the name it
// shadows.
func CaseVariant(v gjson.Result, f *Fields) (path, want string, found bool) {
	switch {
	case v.IsArray():
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			if path, want, found = CaseVariant(e, f); found {
				path = strconv.Itoa(i) + "." + path
			}
			i++
			return !found
		})
	case v.IsObject():
		var buf [64]byte // member names are short: folded without allocating
		v.ForEach(func(k, e gjson.Result) bool {
			m, ok := f.byFold[string(appendFold(buf[:0], k.Str))]
			switch {
			case !ok:
			case k.Str != m.name:
				path, want, found = k.Str, m.name, true
			case m.sub != nil:
				if path, want, found = CaseVariant(e, m.sub); found {
					path = k.Str + "." + path // the path is built only for a refusal
				}
			}
			return !found
		})
	}
	return path, want, found
}

// fold maps every name that encoding/json would match with s to one
// string, as its own name folding does: ASCII letters upper-cased, any
// other character r to unicode.ToUpper(unicode.ToLower(r)), so "ſtream"
// with a long s and "max_toKens" with a Kelvin sign fold as "STREAM" and
// "MAX_TOKENS" do.
func fold(s string) string { return string(appendFold(nil, s)) }

// appendFold appends s folded to b.
func appendFold(b []byte, s string) []byte {
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z':
			b = append(b, byte(r)-'a'+'A')
		case r < utf8.RuneSelf:
			b = append(b, byte(r))
		default:
			b = utf8.AppendRune(b, unicode.ToUpper(unicode.ToLower(r)))
		}
	}
	return b
}
