package usagelog

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// rowColumns are the CSV columns of a row, in order (columns added later
// go last, so that a consumer reading by position keeps working).
var rowColumns = []string{"id", "time", "request_id", "tenant", "key_id", "model", "provider", "provider_model", "endpoint",
	"status", "attempts", "prompt_tokens", "completion_tokens", "cost_nano_usd", "cost_usd", "held_nano_usd", "ttft_ms",
	"duration_ms", "stream", "unpriced", "served_model", "tags"}

var sumColumns = []string{"requests", "prompt_tokens", "completion_tokens", "cost_nano_usd", "cost_usd", "held_nano_usd",
	"unpriced_requests"}

// ContentType is the media type of a format.
func ContentType(format string) string {
	switch format {
	case FormatCSV:
		return "text/csv; charset=utf-8"
	case FormatJSONL:
		return "application/x-ndjson"
	}
	return "application/json"
}

// cell guards a text cell of a CSV export against spreadsheet formula
// injection (a request id or model name beginning with =, +, - or @ would
// run as a formula when the file is opened): such a cell gets a leading
// apostrophe.
func cell(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD") // a CSV file is UTF-8 throughout
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r') {
		return "'" + s
	}
	return s
}

func usdText(nano int64) string { return strconv.FormatFloat(usd(nano), 'f', -1, 64) }

// RowWriter writes rows in one format as they come (an export streams:
// nothing is held but the current row).
type RowWriter struct {
	format string
	buf    *bufio.Writer
	csv    *csv.Writer
	n      int
}

// NewRowWriter starts an export of rows to w in format.
func NewRowWriter(w io.Writer, format string) *RowWriter {
	rw := &RowWriter{format: format, buf: bufio.NewWriterSize(w, 32<<10)}
	switch format {
	case FormatCSV:
		rw.csv = csv.NewWriter(rw.buf)
		_ = rw.csv.Write(rowColumns)
	case FormatJSON:
		_, _ = rw.buf.WriteString("[")
	}
	return rw
}

// Write writes one row.
func (rw *RowWriter) Write(r Row) error {
	rw.n++
	switch rw.format {
	case FormatCSV:
		ttft := ""
		if r.TTFTMs != nil {
			ttft = strconv.FormatInt(*r.TTFTMs, 10)
		}
		cost := usdText(r.CostNano)
		if r.Unpriced {
			cost = "" // unknown, not 0
		}
		return rw.csv.Write([]string{strconv.FormatInt(r.ID, 10), r.Time.UTC().Format(time.RFC3339Nano), cell(r.RequestID),
			cell(r.Tenant), cell(r.KeyID), cell(r.Model), cell(r.Provider), cell(r.ProviderModel), cell(r.Endpoint),
			strconv.Itoa(r.Status), strconv.Itoa(r.Attempts), strconv.FormatInt(r.PromptTokens, 10),
			strconv.FormatInt(r.CompletionTokens, 10), strconv.FormatInt(r.CostNano, 10), cost,
			strconv.FormatInt(r.HeldNano, 10), ttft, strconv.FormatInt(r.DurationMs, 10), strconv.FormatBool(r.Stream),
			strconv.FormatBool(r.Unpriced), cell(r.ServedModel), cell(TagText(r.Tags))})
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if rw.format == FormatJSON && rw.n > 1 {
		_ = rw.buf.WriteByte(',')
	}
	if _, err := rw.buf.Write(b); err != nil {
		return err
	}
	if rw.format == FormatJSONL {
		return rw.buf.WriteByte('\n')
	}
	return nil
}

// Flush sends what is buffered (between rows of a long export).
func (rw *RowWriter) Flush() error {
	if rw.csv != nil {
		rw.csv.Flush()
		if err := rw.csv.Error(); err != nil {
			return err
		}
	}
	return rw.buf.Flush()
}

// Close ends the export.
func (rw *RowWriter) Close() error {
	if rw.format == FormatJSON {
		_, _ = rw.buf.WriteString("]\n")
	}
	return rw.Flush()
}

// WriteGroups writes a summary's groups in csv or jsonl (JSON answers
// wrap them in an object; see the admin API).
func WriteGroups(w io.Writer, format string, dims []string, groups []Group) error {
	buf := bufio.NewWriter(w)
	if format == FormatCSV {
		c := csv.NewWriter(buf)
		_ = c.Write(append(append([]string{}, dims...), sumColumns...))
		for _, g := range groups {
			rec := make([]string, 0, len(dims)+len(sumColumns))
			for _, d := range dims {
				rec = append(rec, cell(g.Keys[d]))
			}
			rec = append(rec, strconv.FormatInt(g.Requests, 10), strconv.FormatInt(g.PromptTokens, 10),
				strconv.FormatInt(g.CompletionTokens, 10), strconv.FormatInt(g.CostNano, 10), usdText(g.CostNano),
				strconv.FormatInt(g.HeldNano, 10), strconv.FormatInt(g.Unpriced, 10))
			_ = c.Write(rec)
		}
		c.Flush()
		if err := c.Error(); err != nil {
			return err
		}
		return buf.Flush()
	}
	enc := json.NewEncoder(buf)
	for _, g := range groups {
		if err := enc.Encode(g); err != nil {
			return err
		}
	}
	return buf.Flush()
}

// TagText renders a row's tags as the header sends them
// ("feature=x,team=y", keys sorted).
func TagText(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + m[k])
	}
	return b.String()
}

// Totals sums groups.
func Totals(groups []Group) Group {
	t := Group{Keys: map[string]string{}}
	for _, g := range groups {
		t.Requests += g.Requests
		t.PromptTokens += g.PromptTokens
		t.CompletionTokens += g.CompletionTokens
		t.CostNano += g.CostNano
		t.HeldNano += g.HeldNano
		t.Unpriced += g.Unpriced
	}
	return t
}

// SummaryBody is the JSON answer of a usage query: the groups, their
// total over everything selected, and whether MaxGroups cut the list.
func SummaryBody(q *Query, groups []Group, total Group) map[string]any {
	dims := q.GroupBy
	if dims == nil {
		dims = []string{}
	}
	if groups == nil {
		groups = []Group{}
	}
	return map[string]any{"object": "usage", "group_by": dims, "from": timeOrNil(q.Filter.From), "to": timeOrNil(q.Filter.To),
		"data": groups, "total": total, "truncated": len(groups) >= MaxGroups}
}

// PageBody is the JSON answer of a page of rows; next_cursor is null on
// the last page.
func PageBody(rows []Row, next int64) map[string]any {
	if rows == nil {
		rows = []Row{}
	}
	var cursor any
	if next != 0 {
		cursor = strconv.FormatInt(next, 10)
	}
	return map[string]any{"object": "list", "data": rows, "has_more": next != 0, "next_cursor": cursor}
}

func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Summary runs a usage query: its groups and their total over every row
// selected (a second query only when the groups were cut or not asked).
func (d *DB) Summary(ctx context.Context, q *Query) ([]Group, Group, error) {
	groups, err := d.Summarize(ctx, q.Filter, q.GroupBy)
	if err != nil {
		return nil, Group{}, err
	}
	total := Totals(groups)
	if len(groups) >= MaxGroups {
		all, err := d.Summarize(ctx, q.Filter, nil)
		if err != nil {
			return nil, Group{}, err
		}
		total = Totals(all)
	}
	return groups, total, nil
}
