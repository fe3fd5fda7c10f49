package tags

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"switchboard/internal/config"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		header []string
		want   string // canonical header form
		err    string
	}{
		{"none", nil, "", ""},
		{"two sorted", []string{"team=search, feature=auto complete"}, "feature=auto complete,team=search", ""},
		{"lines join", []string{"a=1", "b=2"}, "a=1,b=2", ""},
		{"same twice", []string{"a=1,a=1"}, "a=1", ""},
		{"value with colon and slash", []string{"customer=acme:eu/1"}, "customer=acme:eu/1", ""},
		{"empty items skipped", []string{",a=1,,"}, "a=1", ""},
		{"no equals", []string{"team"}, "", `"team" is not key=value`},
		{"bad key", []string{"te am=x"}, "", `invalid tag key "te am"`},
		{"empty value", []string{"team="}, "", `invalid value "" for tag "team"`},
		{"non ascii value", []string{"team=équipe"}, "", "invalid value"},
		{"quote in value", []string{`team=a"b`}, "", "invalid value"},
		{"two values", []string{"a=1,a=2"}, "", `tag "a" is given twice`},
		{"eleven", []string{"a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1,j=1,k=1"}, "", "more than 10 tags"},
		{"long key", []string{strings.Repeat("k", 65) + "=v"}, "", "invalid tag key"},
		{"long value", []string{"k=" + strings.Repeat("v", 129)}, "", "invalid value"},
		{"huge header", []string{strings.Repeat("x", 3000)}, "", "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.header)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Message, tc.err) || err.Param != Header {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.String() != tc.want {
				t.Fatalf("got %q want %q", s.String(), tc.want)
			}
		})
	}
}

func pairs(kv ...any) func(func(string, string, bool) bool) {
	return func(yield func(string, string, bool) bool) {
		for i := 0; i < len(kv); i += 2 {
			v, ok := kv[i+1].(string)
			if !yield(kv[i].(string), v, ok) {
				return
			}
		}
	}
}

func TestMerge(t *testing.T) {
	h, _ := Parse([]string{"team=a"})
	s, err := h.Merge(pairs("feature", "x", "team", "a"))
	if err != nil || s.String() != "feature=x,team=a" {
		t.Fatalf("%v %v", s, err)
	}
	if _, err := h.Merge(pairs("team", "b")); err == nil || err.Param != "metadata" || !strings.Contains(err.Message, "given twice") {
		t.Fatalf("conflict: %v", err)
	}
	if _, err := h.Merge(pairs("n", 3)); err == nil || !strings.Contains(err.Message, "must be a string") {
		t.Fatalf("number: %v", err)
	}
	if h.String() != "team=a" {
		t.Fatalf("merge changed its receiver: %v", h)
	}
	if s.JSON() != `{"feature":"x","team":"a"}` || Set(nil).JSON() != "" {
		t.Fatalf("json %q", s.JSON())
	}
}

// TestRules: the tags: section's rules, compiled (Compile), per tenant.
func TestRules(t *testing.T) {
	p := Compile(&config.Tags{Default: &config.TagRules{Required: []string{"team"}}, Tenants: map[string]*config.TagRules{
		"acme": {Allowed: []string{"feature"}, Required: []string{"team"}},
		"free": nil,
	}})
	set := func(h string) Set { s, _ := Parse([]string{h}); return s }
	tests := []struct {
		tenant, header, err string
	}{
		{"acme", "team=a,feature=f", ""},
		{"acme", "feature=f", `tag "team" is required`},
		{"acme", "team=a,customer=c", `tag "customer" is not allowed`},
		{"other", "customer=c", `tag "team" is required`},
		{"other", "team=a,customer=c", ""},
		{"free", "", ""},
	}
	for _, tc := range tests {
		err := p.For(tc.tenant).Check(set(tc.header), Header)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s %q: %v", tc.tenant, tc.header, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Message, tc.err)):
			t.Errorf("%s %q: %v, want %q", tc.tenant, tc.header, err, tc.err)
		}
	}
}

func TestMeterBoundsValues(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMeter(reg)
	m.Configure([]string{"team"}, 2)
	for _, h := range []string{"team=a", "team=b", "team=c", "team=a", "feature=x"} {
		s, _ := Parse([]string{h})
		m.Observe(s, 10)
	}
	got := map[string]float64{}
	for _, v := range []string{"a", "b", "c", Other} {
		got[v] = testutil.ToFloat64(m.requests.WithLabelValues("team", v))
	}
	if got["a"] != 2 || got["b"] != 1 || got["c"] != 0 || got[Other] != 1 {
		t.Fatalf("%v", got)
	}
	if c := testutil.ToFloat64(m.cost.WithLabelValues("team", "a")); c != 20 {
		t.Fatalf("cost %v", c)
	}
	// Reconfigured with another key: the old key is no longer counted.
	m.Configure([]string{"feature"}, 2)
	s, _ := Parse([]string{"team=a,feature=x"})
	m.Observe(s, 0)
	if testutil.ToFloat64(m.requests.WithLabelValues("team", "a")) != 2 || testutil.ToFloat64(m.requests.WithLabelValues("feature", "x")) != 1 {
		t.Fatal("reconfigure")
	}
}
