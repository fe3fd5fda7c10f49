package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"switchboard/internal/config"
)

// Error is a refusal of an admin call, for the client: the status, an
// OpenAI-style code, the field at fault (param) and a message.
type Error struct {
	Status  int
	Code    string
	Param   string
	Message string
}

func (e *Error) Error() string { return e.Message }

func invalid(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid_value", Param: param, Message: param + ": " + fmt.Sprintf(format, args...)}
}

// Bounds of the admin-only fields (the limits share the config's).
const (
	maxNameLen = 128
	// MaxKeys and MaxTenants bound what the API issues (every replica
	// holds all of it in memory); revoked keys count, as their records stay.
	MaxKeys      = 100_000
	MaxTenants   = 10_000
	maxModels    = 1024
	maxGraceSecs = 86400
	// maxExpiry bounds expires_at, so that a typo in the year is caught.
	maxExpiry = 100 * 365 * 24 * time.Hour
)

// KeyFields are the fields of a key create or update.
type KeyFields struct {
	Name      *string    `json:"name"`
	Tenant    *string    `json:"tenant"`
	Role      *string    `json:"role"`
	Tier      *int       `json:"tier"`
	ExpiresAt *time.Time `json:"expires_at"`
	Models    *[]string  `json:"models"`
	RPM       *int64     `json:"rpm"`
	TPM       *int64     `json:"tpm"`
	// The key's own daily count and budget, on top of its tenant's.
	DailyRequests    *int64   `json:"daily_requests"`
	BudgetUSD        *float64 `json:"budget_usd"`
	BudgetWindowSecs *int64   `json:"budget_window_secs"`
}

var keyFieldNames = []string{"name", "tenant", "role", "tier", "expires_at", "models", "rpm", "tpm", "daily_requests",
	"budget_usd", "budget_window_secs"}

// TenantFields are the fields of a tenant create or update.
type TenantFields struct {
	Name                *string  `json:"name"`
	RPM                 *int64   `json:"rpm"`
	TPM                 *int64   `json:"tpm"`
	DailyRequests       *int64   `json:"daily_requests"`
	BudgetUSD           *float64 `json:"budget_usd"`
	BudgetWindowSecs    *int64   `json:"budget_window_secs"`
	BudgetAllowUnpriced *bool    `json:"budget_allow_unpriced"`
}

var tenantFieldNames = []string{"name", "rpm", "tpm", "daily_requests", "budget_usd", "budget_window_secs", "budget_allow_unpriced"}

// RotateFields are the fields of a rotation.
type RotateFields struct {
	// GraceSeconds keeps the old secret working this long (0..86400,
	// default 0: it stops at once).
	GraceSeconds *int64 `json:"grace_seconds"`
}

var rotateFieldNames = []string{"grace_seconds"}

// Patch is a decoded update body: which fields were present (a present
// null clears a limit, an expiry or a model list).
type Patch struct {
	present map[string]bool
}

// Has reports whether the body named field.
func (p Patch) Has(field string) bool { return p.present[field] }

// Decode reads one JSON object strictly into v: unknown fields, wrong
// types and trailing data are 400s naming the field. known lists v's
// fields for the message.
func Decode(body []byte, v any, known []string) (Patch, *Error) {
	p := Patch{present: map[string]bool{}}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return p, &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: "the body must be one JSON object: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	if k, dup := duplicateField(body); dup {
		return p, &Error{Status: http.StatusBadRequest, Code: "invalid_json", Param: k,
			Message: fmt.Sprintf("field %q is given twice; give each field once", k)}
	}
	for k := range raw {
		p.present[k] = true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var pe *time.ParseError
		switch {
		case errors.As(err, &te):
			return p, invalid(te.Field, "want %s, got %s", wantOf(te.Type.String()), te.Value)
		case errors.As(err, &pe) || strings.Contains(err.Error(), "Time.UnmarshalJSON"):
			return p, invalid("expires_at", "want an RFC 3339 time such as 2030-01-02T15:04:05Z")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			msg := fmt.Sprintf("unknown field %q (known: %s)", f, strings.Join(known, ", "))
			if _, isKey := v.(*KeyFields); isKey && slices.Contains(tenantFieldNames[1:], f) {
				msg += "; budget_allow_unpriced belongs to the tenant, whose keys share it: PATCH /admin/v1/tenants/{tenant}"
			}
			return p, &Error{Status: http.StatusBadRequest, Code: "unknown_field", Param: f, Message: msg}
		}
		return p, &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: strings.TrimPrefix(err.Error(), "json: ")}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return p, &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: "unexpected data after the JSON object"}
	}
	return p, nil
}

// duplicateField finds a field named twice in a JSON object (body is one
// valid object). Decoders keep the last copy, so a body naming one value
// first could be logged or checked by a proxy with one value and applied
// with another; like /v1 bodies, it is refused.
func duplicateField(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // {
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		k, _ := t.(string)
		if seen[k] {
			return k, true
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

func wantOf(t string) string {
	switch strings.TrimPrefix(t, "*") {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "float64":
		return "a number"
	case "[]string":
		return "a list of strings"
	case "time.Time":
		return "an RFC 3339 time"
	}
	return "an integer"
}

// checkName checks a key's or tenant's name.
func checkName(param, name string) *Error {
	switch {
	case strings.TrimSpace(name) == "":
		return invalid(param, "required")
	case len(name) > maxNameLen:
		return invalid(param, "at most %d bytes, got %d", maxNameLen, len(name))
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0:
		return invalid(param, "must not contain control characters")
	case strings.IndexFunc(name, func(r rune) bool { return unicode.Is(unicode.Bidi_Control, r) }) >= 0:
		// An override (U+202E…) reorders what follows it wherever the name
		// is shown: the audit log, the admin page, a terminal's usage table.
		return invalid(param, "must not contain bidirectional control characters (U+202A..U+202E, U+2066..U+2069, U+200E, U+200F, U+061C)")
	}
	return nil
}

// checkSpec runs the config's checks of an identity; the first problem is
// the answer, named as the API names the field.
func checkSpec(spec *config.KeySpec, tenantParam string) *Error {
	var first *Error
	config.CheckKeySpec(spec, func(field, format string, args ...any) {
		if first != nil {
			return
		}
		if field == "tenant" {
			field = tenantParam
		}
		first = invalid(field, format, args...)
	})
	return first
}
