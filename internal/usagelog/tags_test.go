package usagelog

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Tags are stored with each row and read back; a tag filter selects the
// rows carrying every tag named, and group_by=tag:<key> sums by a tag's
// value (rows without it form the group "").
func TestTagsFilterAndGroup(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	mk := func(i int, cost int64, tg map[string]string) Row {
		r := row(i, t0.Add(time.Duration(i)*time.Second), "acme", "m", cost)
		r.Tags = tg
		return r
	}
	if err := db.Insert(ctx,
		mk(1, 100, map[string]string{"team": "search", "feature": "auto"}),
		mk(2, 200, map[string]string{"team": "search"}),
		mk(3, 400, map[string]string{"team": "ads", "feature": "auto"}),
		mk(4, 800, nil),
	); err != nil {
		t.Fatal(err)
	}
	q := func(kind, raw string) *Query {
		v, _ := url.ParseQuery(raw)
		q, perr := ParseQuery(kind, v)
		if perr != nil {
			t.Fatalf("%s: %v", raw, perr)
		}
		return q
	}
	groups, total, err := db.Summary(ctx, q(KindUsage, "group_by=tag:team"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, g := range groups {
		got[g.Keys["tag:team"]] = g.CostNano
	}
	if len(groups) != 3 || got["search"] != 300 || got["ads"] != 400 || got[""] != 800 || total.CostNano != 1500 {
		t.Fatalf("by team: %+v total %+v", groups, total)
	}
	groups, _, err = db.Summary(ctx, q(KindUsage, "group_by=tag:team,tag:feature&tag=feature:auto"))
	if err != nil || len(groups) != 2 {
		t.Fatalf("by team and feature, feature auto: %+v %v", groups, err)
	}
	rows, _, err := db.List(ctx, q(KindRequests, "tag=team:search,feature:auto").Filter, 0, 10)
	if err != nil || len(rows) != 1 || rows[0].RequestID != "req_1" || rows[0].Tags["feature"] != "auto" || rows[0].Tags["team"] != "search" {
		t.Fatalf("two-tag filter: %+v %v", rows, err)
	}
	rows, _, _ = db.List(ctx, Filter{}, 0, 10)
	if len(rows) != 4 || rows[0].Tags != nil {
		t.Fatalf("untagged row read back with tags: %+v", rows[0])
	}
	// CSV: the tags column, as the header writes them.
	var b bytes.Buffer
	rw := NewRowWriter(&b, FormatCSV)
	for _, r := range rows {
		_ = rw.Write(r)
	}
	_ = rw.Close()
	if !strings.Contains(b.String(), `"feature=auto,team=search"`) || !strings.HasSuffix(strings.SplitN(b.String(), "\n", 2)[0], ",tags") {
		t.Fatalf("csv:\n%s", b.String())
	}
	// The parameter renders back for the CLI's remote queries.
	if v := q(KindRequests, "tag=team:search").Values().Get("tag"); v != "team:search" {
		t.Fatalf("Values tag %q", v)
	}
}

func TestTagQueryErrors(t *testing.T) {
	for _, tc := range []struct{ kind, raw, param, msg string }{
		{KindUsage, "group_by=tag:", "group_by", "unknown dimension"},
		{KindUsage, "group_by=tag:a'b", "group_by", "unknown dimension"},
		{KindRequests, "tag=team", "tag", "want key:value"},
		{KindRequests, "tag=te am:x", "tag", "invalid tag key"},
		{KindRequests, "tag=team:a,team:b", "tag", "given twice"},
	} {
		v, _ := url.ParseQuery(tc.raw)
		_, perr := ParseQuery(tc.kind, v)
		if perr == nil || perr.Param != tc.param || !strings.Contains(perr.Message, tc.msg) {
			t.Errorf("%s: %v, want %s: %s", tc.raw, perr, tc.param, tc.msg)
		}
	}
}
