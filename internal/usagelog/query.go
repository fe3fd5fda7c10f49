package usagelog

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"switchboard/internal/tags"
)

// Formats of a query's answer.
const (
	FormatJSON  = "json"
	FormatCSV   = "csv"
	FormatJSONL = "jsonl"
)

// Bounds of a query.
const (
	// DefaultPage is a JSON page's rows when limit is not given.
	DefaultPage = 100
	// MaxExport bounds the rows of one CSV or JSON-lines export.
	MaxExport = 1_000_000
	// maxParam bounds a parameter's length.
	maxParam = 256
)

// Kinds of query: sums (GET /admin/v1/usage) or rows (GET
// /admin/v1/requests).
const (
	KindUsage    = "usage"
	KindRequests = "requests"
)

// Query is a validated query of either kind.
type Query struct {
	Kind    string
	Filter  Filter
	GroupBy []string
	Format  string
	// Limit: rows of a JSON page (1..MaxPage), or of an export
	// (1..MaxExport).
	Limit  int
	Cursor int64
}

// ParamError names the parameter that is wrong.
type ParamError struct {
	Param, Message string
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Message }

var params = map[string][]string{
	KindUsage:    {"group_by", "from", "to", "tenant", "key", "model", "served_model", "provider", "status", "tag", "format"},
	KindRequests: {"from", "to", "tenant", "key", "model", "served_model", "provider", "status", "tag", "format", "limit", "cursor"},
}

// Params lists the parameters a kind of query accepts.
func Params(kind string) []string { return params[kind] }

// ParseQuery validates v as a query of kind: every parameter known, given
// once, and in range; the first problem is returned, naming the parameter.
func ParseQuery(kind string, v url.Values) (*Query, *ParamError) {
	allowed := params[kind]
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return nil, &ParamError{k, "unknown parameter; accepted: " + strings.Join(allowed, ", ")}
		}
		if len(v[k]) > 1 {
			return nil, &ParamError{k, "given more than once"}
		}
		if len(v[k][0]) > maxParam {
			return nil, &ParamError{k, fmt.Sprintf("longer than %d bytes", maxParam)}
		}
	}
	q := &Query{Kind: kind, Format: FormatJSON}
	var err *ParamError
	if q.Filter.From, err = parseTime("from", v.Get("from")); err != nil {
		return nil, err
	}
	if q.Filter.To, err = parseTime("to", v.Get("to")); err != nil {
		return nil, err
	}
	if !q.Filter.From.IsZero() && !q.Filter.To.IsZero() && !q.Filter.From.Before(q.Filter.To) {
		return nil, &ParamError{"to", "must be after from"}
	}
	q.Filter.Tenant, q.Filter.KeyID, q.Filter.Model, q.Filter.Provider = v.Get("tenant"), v.Get("key"), v.Get("model"), v.Get("provider")
	q.Filter.ServedModel = v.Get("served_model")
	if s := v.Get("status"); s != "" {
		if len(s) == 3 && s[1:] == "xx" && s[0] >= '1' && s[0] <= '5' {
			q.Filter.StatusClass = int(s[0] - '0')
		} else if n, e := strconv.Atoi(s); e == nil && n >= 100 && n <= 599 {
			q.Filter.Status = n
		} else {
			return nil, &ParamError{"status", fmt.Sprintf("must be an HTTP status (100..599) or a class such as 4xx, got %q", s)}
		}
	}
	if s := v.Get("tag"); s != "" {
		ts, perr := parseTagFilter(s)
		if perr != nil {
			return nil, perr
		}
		q.Filter.Tags = ts
	}
	if f := v.Get("format"); f != "" {
		if f != FormatJSON && f != FormatCSV && f != FormatJSONL {
			return nil, &ParamError{"format", fmt.Sprintf("must be json, csv or jsonl, got %q", f)}
		}
		q.Format = f
	}
	if kind == KindUsage {
		if g := v.Get("group_by"); g != "" {
			for _, d := range strings.Split(g, ",") {
				d = strings.TrimSpace(d)
				if !validDimension(d) {
					return nil, &ParamError{"group_by", fmt.Sprintf("unknown dimension %q; one or more (comma-separated) of %s, or tag:<key>", d, strings.Join(Dimensions, ", "))}
				}
				if slices.Contains(q.GroupBy, d) {
					return nil, &ParamError{"group_by", fmt.Sprintf("%q is named twice", d)}
				}
				q.GroupBy = append(q.GroupBy, d)
			}
			if len(q.GroupBy) > 3 {
				return nil, &ParamError{"group_by", "at most 3 dimensions"}
			}
		}
		return q, nil
	}
	q.Limit = DefaultPage
	max := MaxPage
	if q.Format != FormatJSON {
		q.Limit, max = MaxExport, MaxExport
	}
	if s := v.Get("limit"); s != "" {
		n, e := strconv.Atoi(s)
		if e != nil || n < 1 || n > max {
			return nil, &ParamError{"limit", fmt.Sprintf("must be an integer from 1 to %d for format %s, got %q", max, q.Format, s)}
		}
		q.Limit = n
	}
	if s := v.Get("cursor"); s != "" {
		n, e := strconv.ParseInt(s, 10, 64)
		if e != nil || n < 1 {
			return nil, &ParamError{"cursor", fmt.Sprintf("must be the next_cursor of a previous page, got %q", s)}
		}
		q.Cursor = n
	}
	return q, nil
}

// parseTagFilter reads tag=key:value[,key2:value2] (rows must carry
// every one).
func parseTagFilter(s string) (tags.Set, *ParamError) {
	var pairs []string
	for p := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), ":")
		if !ok {
			return nil, &ParamError{"tag", fmt.Sprintf("want key:value (comma-separated for several), got %q", p)}
		}
		pairs = append(pairs, k+"="+v)
	}
	ts, err := tags.Parse([]string{strings.Join(pairs, ",")})
	if err != nil {
		return nil, &ParamError{"tag", err.Message}
	}
	return ts, nil
}

// tagFilterText renders a tag filter as the parameter reads.
func tagFilterText(ts tags.Set) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.Key + ":" + t.Value
	}
	return strings.Join(parts, ",")
}

// parseTime reads RFC 3339, a UTC date (2006-01-02) or Unix seconds.
func parseTime(param, s string) (time.Time, *ParamError) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 && n < 1<<40 {
		return time.Unix(n, 0), nil
	}
	return time.Time{}, &ParamError{param, fmt.Sprintf("must be RFC 3339 (2026-01-02T15:04:05Z), a date (2026-01-02, UTC) or Unix seconds, got %q", s)}
}

// Values renders q back as URL parameters (the CLI sends them to a
// gateway); only what differs from the defaults is set.
func (q *Query) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	f := &q.Filter
	if !f.From.IsZero() {
		v.Set("from", f.From.UTC().Format(time.RFC3339Nano))
	}
	if !f.To.IsZero() {
		v.Set("to", f.To.UTC().Format(time.RFC3339Nano))
	}
	set("tenant", f.Tenant)
	set("key", f.KeyID)
	set("model", f.Model)
	set("served_model", f.ServedModel)
	set("provider", f.Provider)
	if len(f.Tags) > 0 {
		v.Set("tag", tagFilterText(f.Tags))
	}
	switch {
	case f.Status != 0:
		v.Set("status", strconv.Itoa(f.Status))
	case f.StatusClass != 0:
		v.Set("status", strconv.Itoa(f.StatusClass)+"xx")
	}
	if q.Format != FormatJSON {
		v.Set("format", q.Format)
	}
	if q.Kind == KindUsage {
		set("group_by", strings.Join(q.GroupBy, ","))
		return v
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != 0 {
		v.Set("cursor", strconv.FormatInt(q.Cursor, 10))
	}
	return v
}
