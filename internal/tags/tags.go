// Package tags reads the labels a client puts on a request (team,
// feature, customer...): up to MaxTags key=value pairs from the
// X-Switchboard-Tags header or, where the operator allows it, the body's
// metadata object. They are checked against the tenant's rules (keys
// allowed, keys required), then travel with the request to the usage log,
// the spans and, for configured keys only, a metric label.
//
// A tag is text a client chose: keys and values are kept to a small,
// printable ASCII alphabet so that they are safe in SQL expressions built
// from a key (group_by=tag:<key>), in CSV cells, logs and metric labels.
package tags

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"switchboard/internal/config"
)

// Bounds of a request's tags.
const (
	// MaxTags is the most tags one request may carry.
	MaxTags = config.MaxTags
	// MaxKey and MaxValue bound a key's and a value's length in bytes.
	MaxKey   = config.MaxTagKey
	MaxValue = 128
	// Header carries tags: "team=search,feature=autocomplete".
	Header = "X-Switchboard-Tags"
	// maxHeader bounds the header's length before it is parsed.
	maxHeader = MaxTags * (MaxKey + MaxValue + 2)
)

// Tag is one label.
type Tag struct{ Key, Value string }

// Set is a request's tags, sorted by key, each key once; nil is none.
type Set []Tag

// Error is a refused tag: Param names where it came from (the header or
// "metadata"), Message what is wrong, naming the tag.
type Error struct{ Param, Message string }

func (e *Error) Error() string { return e.Param + ": " + e.Message }

// ValidKey reports a key of 1..MaxKey letters, digits, '_', '.' or '-'
// (the grammar the config's tags: section is checked with).
func ValidKey(k string) bool { return config.ValidTagKey(k) }

// ValidValue reports a value of 1..MaxValue printable ASCII characters
// other than ',', '=', '"' and '\', without a leading or trailing space.
func ValidValue(v string) bool {
	if v == "" || len(v) > MaxValue || v[0] == ' ' || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 || c > 0x7e || c == ',' || c == '=' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

const rules = "keys are 1-64 letters, digits, '_', '.' or '-'; values 1-128 printable ASCII characters without ',', '=', '\"' or '\\'"

// shown quotes a client's text for an error message, cut short.
func shown(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// add puts k=v into s, refusing a bad pair, a key given twice with two
// values, or one tag too many.
func (s Set) add(param, k, v string) (Set, *Error) {
	if !ValidKey(k) {
		return s, &Error{param, fmt.Sprintf("invalid tag key %s (%s)", shown(k), rules)}
	}
	if !ValidValue(v) {
		return s, &Error{param, fmt.Sprintf("invalid value %s for tag %q (%s)", shown(v), k, rules)}
	}
	i, found := slices.BinarySearchFunc(s, k, func(t Tag, k string) int { return strings.Compare(t.Key, k) })
	if found {
		if s[i].Value == v {
			return s, nil
		}
		return s, &Error{param, fmt.Sprintf("tag %q is given twice, as %s and %s", k, shown(s[i].Value), shown(v))}
	}
	if len(s) >= MaxTags {
		return s, &Error{param, fmt.Sprintf("more than %d tags", MaxTags)}
	}
	return slices.Insert(s, i, Tag{k, v}), nil
}

// Parse reads the header's values ("k=v,k2=v2"; several header lines are
// one list). No header is no tags.
func Parse(values []string) (Set, *Error) {
	var s Set
	total := 0
	for _, line := range values {
		total += len(line)
		if total > maxHeader {
			return nil, &Error{Header, fmt.Sprintf("longer than %d bytes", maxHeader)}
		}
		for item := range strings.SplitSeq(line, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			k, v, ok := strings.Cut(item, "=")
			if !ok {
				return nil, &Error{Header, fmt.Sprintf("%s is not key=value", shown(item))}
			}
			var err *Error
			if s, err = s.add(Header, strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// Merge adds the pairs of a metadata object (string values only) to s.
// pairs yields each key and its value, and whether the value is a string.
func (s Set) Merge(pairs func(yield func(k, v string, isString bool) bool)) (Set, *Error) {
	var err *Error
	out := slices.Clone(s)
	pairs(func(k, v string, isString bool) bool {
		if !isString {
			err = &Error{"metadata", fmt.Sprintf("metadata value of %s must be a string to be a tag", shown(k))}
			return false
		}
		out, err = out.add("metadata", k, v)
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Get returns k's value.
func (s Set) Get(k string) (string, bool) {
	for _, t := range s {
		if t.Key == k {
			return t.Value, true
		}
	}
	return "", false
}

// Map is s as a map (nil when empty), for rows and JSON.
func (s Set) Map() map[string]string {
	if len(s) == 0 {
		return nil
	}
	m := make(map[string]string, len(s))
	for _, t := range s {
		m[t.Key] = t.Value
	}
	return m
}

// String renders s as the header does.
func (s Set) String() string {
	var b strings.Builder
	for i, t := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t.Key)
		b.WriteByte('=')
		b.WriteString(t.Value)
	}
	return b.String()
}

// JSON is s as a JSON object with sorted keys ("" when empty): how the
// usage log stores it.
func (s Set) JSON() string {
	if len(s) == 0 {
		return ""
	}
	b, _ := json.Marshal(s.Map()) // Go sorts map keys
	return string(b)
}

// Rules are one tenant's: the keys it may send (nil: any) and the keys
// every request of it must carry.
type Rules struct {
	allowed  []string
	required []string
}

// NewRules makes rules; allowed nil allows any key, and a required key is
// allowed too.
func NewRules(allowed, required []string) *Rules {
	r := &Rules{required: slices.Clone(required)}
	if allowed != nil {
		r.allowed = slices.Concat(allowed, required)
	}
	return r
}

// Check refuses a set that lacks a required tag or has a key not allowed,
// naming the tag.
func (r *Rules) Check(s Set, param string) *Error {
	if r == nil {
		return nil
	}
	for _, k := range r.required {
		if _, ok := s.Get(k); !ok {
			return &Error{param, fmt.Sprintf("tag %q is required on every request of this tenant (send %s: %s=<value>)", k, Header, k)}
		}
	}
	if r.allowed == nil {
		return nil
	}
	for _, t := range s {
		if !slices.Contains(r.allowed, t.Key) {
			return &Error{param, fmt.Sprintf("tag %q is not allowed for this tenant; allowed: %s", t.Key, strings.Join(r.allowed, ", "))}
		}
	}
	return nil
}

// Policy is every tenant's rules: Tenants by name, else Default (nil: no
// rules).
type Policy struct {
	Default *Rules
	Tenants map[string]*Rules
}

// For returns the rules of a tenant ("" for a caller without one).
func (p *Policy) For(tenant string) *Rules {
	if p == nil {
		return nil
	}
	if r, ok := p.Tenants[tenant]; ok {
		return r
	}
	return p.Default
}

// Compile makes the policy of the tags: section.
func Compile(t *config.Tags) *Policy {
	rules := func(r *config.TagRules) *Rules {
		if r == nil {
			return nil
		}
		return NewRules(r.Allowed, r.Required)
	}
	p := &Policy{Default: rules(t.Default), Tenants: make(map[string]*Rules, len(t.Tenants))}
	for n, r := range t.Tenants {
		p.Tenants[n] = rules(r)
	}
	return p
}
