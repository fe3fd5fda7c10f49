package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// MaxBudgetUSD is the largest budget_usd: 2^53 nano-USD, so that every
// amount stays an exact integer in any backend (Lua numbers included).
const MaxBudgetUSD = 9007199.254740992

// Roles of a gateway key: a tenant sees its own usage and the model
// names; an admin sees the whole gateway (providers, traffic, every
// tenant's spend, /metrics).
const (
	RoleTenant = "tenant"
	RoleAdmin  = "admin"
)

// Limits of the per-key fields.
const (
	maxTier         = 1000
	maxDaily        = 1_000_000_000
	minBudgetWindow = 60
	maxBudgetWindow = 365 * 86400
)

// keySpecFields lists the keys file's fields for "unknown field" hints.
var keySpecFields = []string{"tenant", "tier", "rpm", "tpm", "daily_requests", "budget_usd", "budget_window_secs", "budget_allow_unpriced", "role"}

// KeyDigest returns the SHA-256 of a gateway key as stored: the digest of a
// plaintext key, or the decoded digest of "sha256:<64 hex>".
func KeyDigest(key string) ([32]byte, error) {
	var d [32]byte
	switch {
	case key == "":
		return d, errors.New("key must not be empty")
	case strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return d, errors.New("key must not contain spaces or control characters")
	}
	if rest, ok := strings.CutPrefix(key, "sha256:"); ok {
		b, err := hex.DecodeString(rest)
		if err != nil || len(b) != 32 {
			return d, errors.New(`want "sha256:" followed by 64 hex digits`)
		}
		copy(d[:], b)
		return d, nil
	}
	return sha256.Sum256([]byte(key)), nil
}

// WindowSecs is the budget window in seconds (default 86400).
func (k *KeySpec) WindowSecs() int64 {
	if k.BudgetWindowSecs == nil {
		return DefaultBudgetWindowSecs
	}
	return *k.BudgetWindowSecs
}

// BudgetNano is the budget in nano-USD; ok is false without a budget.
func (k *KeySpec) BudgetNano() (nano int64, ok bool) {
	if k.BudgetUSD == nil {
		return 0, false
	}
	return USDToNano(*k.BudgetUSD), true
}

// USDToNano converts a validated, non-negative USD amount to nano-USD,
// rounding to the nearest unit.
func USDToNano(usd float64) int64 {
	return int64(math.Round(usd * 1e9))
}

// sameLimits reports whether two specs of one tenant agree on everything
// the counters depend on.
func sameLimits(a, b *KeySpec) bool {
	eq := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqf := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return eq(a.RPM, b.RPM) && eq(a.TPM, b.TPM) && eq(a.DailyRequests, b.DailyRequests) &&
		eqf(a.BudgetUSD, b.BudgetUSD) && a.WindowSecs() == b.WindowSecs() &&
		a.BudgetAllowUnpriced == b.BudgetAllowUnpriced
}

// CheckKeySpec validates one identity with the config's ranges; report
// names the sub-field ("" for the entry itself). The admin API validates
// the keys and tenants it issues with it too, so the ranges agree.
func CheckKeySpec(k *KeySpec, report func(field, format string, args ...any)) {
	if strings.TrimSpace(k.Tenant) == "" {
		report("tenant", "required")
	} else if strings.ContainsAny(k.Tenant, "\r\n\x00") {
		report("tenant", "must not contain CR, LF or NUL")
	}
	rng := func(field string, v *int64, hi int64) {
		if v != nil && (*v < 0 || *v > hi) {
			report(field, "must be between 0 and %d, got %d", hi, *v)
		}
	}
	if k.Role != "" && k.Role != RoleTenant && k.Role != RoleAdmin {
		report("role", "must be %q or %q, got %q", RoleTenant, RoleAdmin, k.Role)
	}
	if k.Tier < 0 || k.Tier > maxTier {
		report("tier", "must be between 0 and %d, got %d", maxTier, k.Tier)
	}
	rng("rpm", k.RPM, maxRPM)
	rng("tpm", k.TPM, maxTPM)
	rng("daily_requests", k.DailyRequests, maxDaily)
	if b := k.BudgetUSD; b != nil && !(*b >= 0 && *b <= MaxBudgetUSD) { // also NaN
		report("budget_usd", "must be finite, at least 0 and at most 9007199.254740992 (2^53 nano-USD), got %s (an invalid budget fails closed)",
			strconv.FormatFloat(*b, 'f', -1, 64))
	}
	if w := k.BudgetWindowSecs; w != nil && (*w < minBudgetWindow || *w > maxBudgetWindow) {
		report("budget_window_secs", "must be between %d and %d, got %d", minBudgetWindow, maxBudgetWindow, *w)
	}
}

// keyEntry is one gateway key from either source, for the checks that span
// both.
type keyEntry struct {
	key   string
	spec  *KeySpec
	label string // auth.keys[#1] or auth.keys_file[#1]
	// report files a problem against the entry.
	report func(field, format string, args ...any)
}

// validateAuth reads auth.keys_file, checks every key and identity, and
// checks what spans entries: duplicate keys, tenants with diverging
// limits, and auth.token colliding with a key.
func (l *loader) validateAuth(c *Config) {
	a := &c.Auth
	var entries []keyEntry
	ymlKeys := make([]string, 0, len(a.Keys))
	for k := range a.Keys {
		ymlKeys = append(ymlKeys, k)
	}
	// Position order, which is file order.
	slices.SortFunc(ymlKeys, func(x, y string) int {
		return l.lineOf(l.label("auth.keys", x)) - l.lineOf(l.label("auth.keys", y))
	})
	for _, k := range ymlKeys {
		lb := l.label("auth.keys", k)
		spec := a.Keys[k]
		spec.Source = fmt.Sprintf("%s:%d", l.file, l.lineOf(lb))
		entries = append(entries, keyEntry{key: k, spec: spec, label: lb, report: func(field, format string, args ...any) {
			l.errAt(sub(lb, field), format, args...)
		}})
	}
	if a.KeysFile != "" && !l.bad["auth.keys_file"] {
		entries = append(entries, l.readKeysFile(a)...)
	}

	var tokenDigest *[32]byte
	if a.Token != "" {
		d := sha256.Sum256([]byte(a.Token))
		tokenDigest = &d
	}
	if a.AdminToken != "" {
		if _, err := KeyDigest(a.AdminToken); err != nil || strings.HasPrefix(a.AdminToken, "sha256:") {
			l.errAt("auth.admin_token", "must be a plaintext token without spaces or control characters")
		} else if a.AdminToken == a.Token {
			l.errAt("auth.admin_token", "equals auth.token; use a different token for the admin API")
		}
	}
	var adminDigest [32]byte
	if a.AdminToken != "" {
		adminDigest = sha256.Sum256([]byte(a.AdminToken))
	}
	seen := map[[32]byte]string{}
	tenants := map[string]keyEntry{}
	for _, e := range entries {
		d, err := KeyDigest(e.key)
		if err != nil {
			e.report("", "%v", err)
		} else if first, dup := seen[d]; dup {
			e.report("", "the same key as %s (a key may map to one identity only)", first)
		} else if tokenDigest != nil && d == *tokenDigest {
			e.report("", "equals auth.token, which is the anonymous key; use a different key")
		} else if a.AdminToken != "" && d == adminDigest {
			e.report("", "equals auth.admin_token; a gateway key and the admin token must differ")
		} else {
			seen[d] = e.label
		}
		CheckKeySpec(e.spec, e.report)
		if e.spec.Tenant == "" {
			continue
		}
		if first, ok := tenants[e.spec.Tenant]; !ok {
			tenants[e.spec.Tenant] = e
		} else if !sameLimits(first.spec, e.spec) {
			e.report("", "tenant %q has other limits at %s (%s); keys of one tenant share its counters and must agree",
				e.spec.Tenant, first.label, first.spec.Source)
		}
	}
}

// readKeysFile loads auth.keys_file into a.FileKeys; problems are reported
// against the keys file with their line there.
func (l *loader) readKeysFile(a *Auth) []keyEntry {
	path := a.KeysFile
	if !filepath.IsAbs(path) && l.file != "" {
		path = filepath.Join(filepath.Dir(l.file), path)
	}
	a.KeysPath = path
	data, err := ReadFile(path, MaxKeysFileBytes)
	if err != nil {
		l.errAt("auth.keys_file", "cannot read keys file: %v", err)
		return nil
	}
	a.KeysSum = sha256.Sum256(data)
	fail := func(line int, field, format string, args ...any) {
		l.errs = append(l.errs, &FieldError{File: path, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	raw, perr := parseKeysJSON(data)
	if perr != nil {
		fail(perr.line, "auth.keys_file", "invalid keys file: %s (want a JSON object mapping each key to {\"tenant\": ..., \"rpm\": ...})", perr.msg)
		return nil
	}
	a.FileKeys = make(map[string]*KeySpec, len(raw))
	var out []keyEntry
	for i, r := range raw {
		lb := fmt.Sprintf("auth.keys_file[#%d]", i+1)
		line := r.line
		report := func(field, format string, args ...any) { fail(line, sub(lb, field), format, args...) }
		if r.dupOf > 0 {
			report("", "duplicate key (first at line %d)", r.dupOf)
			continue
		}
		spec, msg := decodeKeySpec(r.value)
		if spec == nil {
			report("", "%s", msg)
			continue
		}
		spec.Source = fmt.Sprintf("%s:%d", path, line)
		a.FileKeys[r.key] = spec
		out = append(out, keyEntry{key: r.key, spec: spec, label: lb, report: report})
	}
	return out
}

type rawKey struct {
	key   string
	value []byte
	line  int
	dupOf int // line of the first entry with the same key, 0 if none
}

type jsonErr struct {
	line int
	msg  string
}

// parseKeysJSON splits the top-level object into entries with their lines,
// keeping duplicates so they can be reported.
func parseKeysJSON(data []byte) ([]rawKey, *jsonErr) {
	dec := json.NewDecoder(bytes.NewReader(data))
	lineAt := func(off int64) int { return 1 + bytes.Count(data[:min(int(off), len(data))], []byte("\n")) }
	wrap := func(err error) *jsonErr {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return &jsonErr{lineAt(se.Offset), se.Error()}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return &jsonErr{lineAt(int64(len(data))), "unexpected end of file"}
		}
		return &jsonErr{lineAt(dec.InputOffset()), err.Error()}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, wrap(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, &jsonErr{1, "the top level is not an object"}
	}
	var out []rawKey
	first := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, wrap(err)
		}
		key, _ := tok.(string)
		line := lineAt(dec.InputOffset())
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, wrap(err)
		}
		r := rawKey{key: key, value: v, line: line}
		if f, dup := first[key]; dup {
			r.dupOf = f
		} else {
			first[key] = line
		}
		out = append(out, r)
	}
	if _, err := dec.Token(); err != nil {
		return nil, wrap(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &jsonErr{lineAt(dec.InputOffset()), "unexpected data after the top-level object"}
	}
	return out, nil
}

// decodeKeySpec decodes one entry strictly; nil and a message on failure.
func decodeKeySpec(v []byte) (*KeySpec, string) {
	if len(v) == 0 || v[0] != '{' {
		return nil, fmt.Sprintf("want an object such as {\"tenant\": \"acme\"}, got %s", v)
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	spec := &KeySpec{}
	if err := dec.Decode(spec); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			want := "an integer"
			switch te.Type.String() {
			case "string":
				want = "a string"
			case "bool":
				want = "true or false"
			case "float64", "*float64":
				want = "a number"
			}
			return nil, fmt.Sprintf("%s: want %s, got %s", te.Field, want, shownJSON(v, te.Field, te.Value))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return nil, fmt.Sprintf("%s (known: %s)", strings.TrimPrefix(err.Error(), "json: "), strings.Join(keySpecFields, ", "))
		}
		return nil, strings.TrimPrefix(err.Error(), "json: ")
	}
	return spec, ""
}

// shownJSON is the value of field in the JSON object obj as the file has
// it (cut to 40 bytes), for a message; kind (encoding/json's name of its
// type) when it cannot be read. No field of a key's entry is secret: the
// key itself is never part of obj.
func shownJSON(obj []byte, field, kind string) string {
	var m map[string]json.RawMessage
	raw, ok := []byte(nil), false
	if json.Unmarshal(obj, &m) == nil {
		raw, ok = m[field]
	}
	if !ok {
		return kind
	}
	s := string(raw)
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	if len(raw) > 1 && raw[0] == '"' {
		if _, err := strconv.ParseFloat(string(raw[1:len(raw)-1]), 64); err == nil {
			s += " (a quoted string; remove the quotes)"
		}
	}
	return s
}

// sub names a field of an entry; "" is the entry itself.
func sub(entry, field string) string {
	if field == "" {
		return entry
	}
	return entry + "." + field
}
