package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/usagelog"
)

// usageTimeout bounds a CLI query, an export included.
const usageTimeout = 5 * time.Minute

// maxUsageAnswer bounds a JSON answer the CLI decodes (table output).
const maxUsageAnswer = 64 << 20

// paramFlags maps a query parameter to the CLI flag that sets it, so that
// an error names what the user typed.
var paramFlags = map[string]string{"group_by": "--group-by", "from": "--from", "to": "--to", "tenant": "--tenant",
	"key": "--key-id", "model": "--model", "served_model": "--served-model", "provider": "--provider", "status": "--status", "tag": "--tag", "format": "--format",
	"limit": "--limit", "cursor": "--cursor"}

// usageCmd queries the usage log: sums (default) or rows ("requests"),
// from a usage-log file or from a gateway's admin API.
func usageCmd(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("usage", stdout, stderr)
	cfgPath := fs.String("config", envOr("CONFIG_FILE", "config/config.yaml"), "config naming usage_log.path (read when it exists)")
	stateDir := fs.String("state-dir", envOr("STATE_DIR", "data/"), "state directory holding usage.db (env STATE_DIR)")
	dbPath := fs.String("db", "", "usage-log file (default: usage_log.path, else STATE_DIR/usage.db)")
	base := fs.String("url", "", "a gateway's base URL (http://host:4567): query its admin API instead of a file")
	key := fs.String("key", "", "admin key for --url (default: env SWITCHBOARD_ADMIN_KEY; a flag shows in ps)")
	vals := map[string]*string{}
	for _, p := range []struct{ param, help string }{
		{"group_by", "sums by up to 3 of tenant,key,model,served_model,provider,status,day,hour,tag:<key> (comma-separated)"},
		{"from", "from this time on: RFC 3339, a UTC date (2026-01-02) or Unix seconds"},
		{"to", "before this time (same forms)"},
		{"tenant", "only this tenant"},
		{"key", "only this key id (cfg-… or an admin-API key's id)"},
		{"model", "only this model (as asked)"},
		{"served_model", "only this serving model (a fallback's name when one took over)"},
		{"provider", "only this provider"},
		{"status", "only this HTTP status, or a class: 2xx, 4xx, 5xx"},
		{"tag", "only requests with this tag, key:value (several comma-separated: all of them)"},
		{"limit", "requests: rows (table/json: a page, at most 1000; csv/jsonl: at most 1000000)"},
		{"cursor", "requests: the next_cursor of a previous page"},
	} {
		vals[p.param] = fs.String(strings.TrimPrefix(paramFlags[p.param], "--"), "", p.help)
	}
	format := fs.String("format", "table", "table, csv, jsonl or json")
	words, code, ok := fs.parseWords(args)
	if !ok {
		return code
	}
	// One source: --url with a file flag would silently ignore the file,
	// and --key without --url would be ignored too.
	var fileFlags []string
	keyGiven := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "db", "state-dir", "config":
			fileFlags = append(fileFlags, "--"+f.Name)
		case "key":
			keyGiven = true
		}
	})
	switch {
	case *base != "" && len(fileFlags) > 0:
		fmt.Fprintf(stderr, "--url queries a gateway, %s names a file: give one source\n", strings.Join(fileFlags, " and "))
		return 2
	case *base == "" && keyGiven:
		fmt.Fprintln(stderr, "--key is the admin key for --url; a file needs no key")
		return 2
	}
	kind := usagelog.KindUsage
	switch {
	case len(words) == 0 || len(words) == 1 && words[0] == "summary":
	case len(words) == 1 && words[0] == "requests":
		kind = usagelog.KindRequests
	default:
		fmt.Fprintf(stderr, "unknown words %q\n", words)
		fs.usage(stderr)
		return 2
	}
	v := url.Values{}
	for p, s := range vals {
		if *s == "" {
			continue
		}
		if kind == usagelog.KindUsage && (p == "limit" || p == "cursor") || kind == usagelog.KindRequests && p == "group_by" {
			fmt.Fprintf(stderr, "%s does not apply to switchboard usage %s\n", paramFlags[p], map[string]string{
				usagelog.KindUsage: "(sums)", usagelog.KindRequests: "requests"}[kind])
			return 2
		}
		v.Set(p, *s)
	}
	table := *format == "table"
	if !table {
		v.Set("format", *format)
	}
	q, perr := usagelog.ParseQuery(kind, v)
	if perr != nil {
		fmt.Fprintf(stderr, "%s: %s\n", paramFlags[perr.Param], perr.Message)
		return 2
	}
	if table && kind == usagelog.KindRequests && q.Limit > usagelog.MaxPage {
		q.Limit = usagelog.DefaultPage
	}
	ctx, cancel := context.WithTimeout(context.Background(), usageTimeout)
	defer cancel()
	var err error
	if *base != "" {
		k := *key
		if k == "" {
			k = os.Getenv("SWITCHBOARD_ADMIN_KEY")
		}
		err = usageRemote(ctx, stdout, *base, k, q, table)
	} else {
		path := *dbPath
		if path == "" {
			path = usageFile(fs, *cfgPath, *stateDir)
		}
		err = usageLocal(ctx, stdout, path, q, table)
	}
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

// usageFile is the usage log a gateway with this config and state
// directory writes: usage_log.path, else STATE_DIR/usage.db. A config is
// read when it was named or exists.
func usageFile(fs *flags, cfgPath, stateDir string) string {
	named := false
	fs.Visit(func(f *flag.Flag) { named = named || f.Name == "config" })
	if _, err := os.Stat(cfgPath); named || err == nil {
		if cfg, err := config.Load(cfgPath); err == nil {
			return usageLogPath(cfg, stateDir)
		}
	}
	return usageLogPath(nil, stateDir)
}

// usageLocal answers q from a usage-log file.
func usageLocal(ctx context.Context, stdout io.Writer, path string, q *usagelog.Query, table bool) error {
	db, err := usagelog.OpenReadOnly(path)
	if err != nil {
		return err
	}
	defer db.Close()
	if q.Kind == usagelog.KindUsage {
		groups, total, err := db.Summary(ctx, q)
		if err != nil {
			return err
		}
		switch {
		case table:
			return printGroups(stdout, q.GroupBy, groups, total)
		case q.Format == usagelog.FormatJSON:
			return writeIndented(stdout, usagelog.SummaryBody(q, groups, total))
		}
		return usagelog.WriteGroups(stdout, q.Format, q.GroupBy, groups)
	}
	if table || q.Format == usagelog.FormatJSON {
		rows, next, err := db.List(ctx, q.Filter, q.Cursor, q.Limit)
		if err != nil {
			return err
		}
		if !table {
			return writeIndented(stdout, usagelog.PageBody(rows, next))
		}
		return printRows(stdout, rows, next)
	}
	out := usagelog.NewRowWriter(stdout, q.Format)
	if err := db.EachFrom(ctx, q.Filter, q.Cursor, q.Limit, out.Write); err != nil {
		return err
	}
	return out.Close()
}

// usageRemote asks a gateway's admin API; csv, jsonl and json answers are
// copied as they arrive.
func usageRemote(ctx context.Context, stdout io.Writer, base, key string, q *usagelog.Query, table bool) error {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url must be a gateway's base URL such as http://localhost:4567, got %q", base)
	}
	path := "/admin/v1/usage"
	if q.Kind == usagelog.KindRequests {
		path = "/admin/v1/requests"
	}
	u.Path += path
	u.RawQuery = q.Values().Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Timeout: usageTimeout}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e struct {
			Error struct{ Message, Param string }
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			if f := paramFlags[e.Error.Param]; f != "" {
				return fmt.Errorf("%s (%s): %s", resp.Status, f, e.Error.Message)
			}
			return fmt.Errorf("%s: %s", resp.Status, e.Error.Message)
		}
		return fmt.Errorf("%s from %s", resp.Status, u.Redacted())
	}
	if !table {
		_, err := io.Copy(stdout, resp.Body)
		return err
	}
	body := io.LimitReader(resp.Body, maxUsageAnswer)
	if q.Kind == usagelog.KindUsage {
		var a struct {
			Data  []map[string]any `json:"data"`
			Total map[string]any   `json:"total"`
		}
		if err := json.NewDecoder(body).Decode(&a); err != nil {
			return fmt.Errorf("reading the answer: %w", err)
		}
		groups := make([]usagelog.Group, 0, len(a.Data))
		for _, d := range a.Data {
			groups = append(groups, groupOf(d, q.GroupBy))
		}
		return printGroups(stdout, q.GroupBy, groups, groupOf(a.Total, nil))
	}
	var a struct {
		Data       []json.RawMessage `json:"data"`
		NextCursor *string           `json:"next_cursor"`
	}
	if err := json.NewDecoder(body).Decode(&a); err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	rows := make([]usagelog.Row, 0, len(a.Data))
	for _, raw := range a.Data {
		var r usagelog.Row
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("reading a row: %w", err)
		}
		rows = append(rows, r)
	}
	var next int64
	if a.NextCursor != nil {
		next, _ = strconv.ParseInt(*a.NextCursor, 10, 64)
	}
	return printRows(stdout, rows, next)
}

// groupOf reads a group from its JSON form.
func groupOf(m map[string]any, dims []string) usagelog.Group {
	num := func(k string) int64 {
		f, _ := m[k].(float64)
		return int64(f)
	}
	g := usagelog.Group{Keys: map[string]string{}, Requests: num("requests"), PromptTokens: num("prompt_tokens"),
		CompletionTokens: num("completion_tokens"), CostNano: num("cost_nano_usd"), HeldNano: num("held_nano_usd"),
		Unpriced: num("unpriced_requests")}
	for _, d := range dims {
		g.Keys[d], _ = m[d].(string)
	}
	return g
}

func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func usdCell(nano int64) string { return strconv.FormatFloat(float64(nano)/1e9, 'f', 6, 64) }

func printGroups(w io.Writer, dims []string, groups []usagelog.Group, total usagelog.Group) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := append(append([]string{}, dims...), "requests", "prompt_tokens", "completion_tokens", "cost_usd", "held_usd", "unpriced")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	line := func(keys []string, g usagelog.Group) {
		cells := append(keys, strconv.FormatInt(g.Requests, 10), strconv.FormatInt(g.PromptTokens, 10),
			strconv.FormatInt(g.CompletionTokens, 10), usdCell(g.CostNano), usdCell(g.HeldNano), strconv.FormatInt(g.Unpriced, 10))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	for _, g := range groups {
		keys := make([]string, len(dims))
		for i, d := range dims {
			keys[i] = g.Keys[d]
			if d == "model" || strings.HasPrefix(d, usagelog.TagDimension) {
				keys[i] = usagelog.ClientText(keys[i]) // a client's text: never a terminal escape
			}
		}
		line(keys, g)
	}
	if len(dims) > 0 {
		keys := make([]string, len(dims))
		keys[0] = "total"
		line(keys, total)
	} else if len(groups) == 0 {
		line(nil, total)
	}
	return tw.Flush()
}

func printRows(w io.Writer, rows []usagelog.Row, next int64) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "time\trequest_id\ttenant\tkey_id\tmodel\tserved_model\tprovider\tstatus\tattempts\ttokens\tcost_usd\tttft_ms\tduration_ms\tstream\ttags")
	for _, r := range rows {
		ttft := "-"
		if r.TTFTMs != nil {
			ttft = strconv.FormatInt(*r.TTFTMs, 10)
		}
		cost := usdCell(r.CostNano)
		if r.Unpriced {
			cost += " (unpriced)" // a lower bound: some usage had no price
		}
		served := r.ServedModel
		if served == "" {
			served = "-" // nothing served, or a row from before it was recorded
		}
		tg := "-"
		if len(r.Tags) > 0 {
			tg = usagelog.ClientText(usagelog.TagText(r.Tags)) // checked at the gateway; a file or a remote answer may hold anything
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d/%d\t%s\t%s\t%d\t%t\t%s\n", r.Time.UTC().Format(time.RFC3339),
			r.RequestID, r.Tenant, r.KeyID, usagelog.ClientText(r.Model), served, r.Provider, r.Status, r.Attempts, r.PromptTokens, r.CompletionTokens,
			cost, ttft, r.DurationMs, r.Stream, tg)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != 0 {
		fmt.Fprintf(w, "more: --cursor %d\n", next)
	}
	return nil
}
