package spend

import (
	"bytes"
	"strings"
	"testing"

	"switchboard/internal/config"
)

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }

func TestCatalogEntriesComplete(t *testing.T) {
	families := map[string]bool{}
	for _, e := range Builtin().entries {
		families[e.Family] = true
		if e.Source == "" || e.Date == "" || !e.Priced() || e.Context == Unknown || e.MaxOutput == Unknown {
			t.Errorf("%s: incomplete entry %+v", e.Model, e)
		}
		prev := int64(0)
		for _, tr := range e.Tiers {
			if tr.Above <= prev {
				t.Errorf("%s: tiers not ascending", e.Model)
			}
			prev = tr.Above
		}
	}
	for _, want := range []string{"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o1", "o3", "o3-mini", "o4-mini",
		"gpt-5", "gpt-5-mini", "gpt-5-nano", "claude-3-5-sonnet-20241022", "claude-3-7-sonnet-20250219", "claude-sonnet-4-5",
		"claude-opus-4-1", "claude-haiku-4-5", "gemini-1.5-pro", "gemini-1.5-flash", "gemini-2.0-flash", "gemini-2.5-pro",
		"gemini-2.5-flash", "deepseek-chat", "llama-3.3-70b-versatile", "openai/gpt-oss-120b"} {
		if _, ok := Builtin().find(want); !ok {
			t.Errorf("catalog lacks %s", want)
		}
	}
}

func TestLookup(t *testing.T) {
	tests := []struct{ name, want string }{
		{"gpt-4o", "gpt-4o"},
		{"gpt-4o-2024-08-06", "gpt-4o"},
		{"gpt-4o-2024-05-13", "gpt-4o-2024-05-13"}, // a snapshot with its own price
		{"openai/gpt-4o", "gpt-4o"},                // OpenRouter style
		{"models/gemini-2.5-pro", "gemini-2.5-pro"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929"},
		{"claude-3-5-haiku-latest", "claude-3-5-haiku-20241022"},
		{"gpt-4.1-mini-2099-01-01", "gpt-4.1-mini"}, // unknown snapshot of a known model
		{"accounts/fireworks/models/llama-v3p3-70b-instruct", "accounts/fireworks/models/llama-v3p3-70b-instruct"},
		{"GPT-4O", "gpt-4o"},
		{"demo-chat", ""},
		{"openrouter/auto", ""},
	}
	for _, tt := range tests {
		e, ok := Builtin().Lookup("any", tt.name)
		got := ""
		if ok {
			got = e.Model
		}
		if got != tt.want {
			t.Errorf("Lookup(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestOverridesFieldByField(t *testing.T) {
	cfg := &config.Config{Pricing: map[string]map[string]*config.Price{
		"oai":  {"gpt-4o": {Output: f64(12)}},
		"mock": {"demo-chat": {Input: f64(1), Output: f64(2), MaxOutput: i64(100)}, "half": {Input: f64(1)}},
		"gem":  {"gemini-2.5-pro": {Tiers: []*config.PriceTier{{Above: 1000, Output: f64(99)}}}},
	}}
	c := New(cfg)
	e, _ := c.Lookup("oai", "gpt-4o")
	if e.Input != PerMillion(2.5) || e.Output != PerMillion(12) || e.CacheRead != PerMillion(1.25) || e.Context != 128000 {
		t.Errorf("gpt-4o override = %+v", e)
	}
	if e2, _ := c.Lookup("other", "gpt-4o"); e2.Output != PerMillion(10) {
		t.Errorf("override leaked to another provider: %+v", e2)
	}
	if e, _ := c.Lookup("mock", "demo-chat"); !e.Priced() || e.MaxOutput != 100 || e.Context != Unknown || e.Source != "config: pricing.mock.demo-chat" {
		t.Errorf("demo-chat = %+v", e)
	}
	if e, _ := c.Lookup("mock", "half"); e.Priced() {
		t.Errorf("an input price alone must not price a model: %+v", e)
	}
	g, _ := c.Lookup("gem", "gemini-2.5-pro")
	if r := g.RatesAt(2000); r.Output != PerMillion(99) || r.Input != PerMillion(1.25) {
		t.Errorf("tier override = %+v", r)
	}
	if Builtin().overrides["oai"] != nil {
		t.Error("New mutated the built-in catalog")
	}
}

func TestFamilyOf(t *testing.T) {
	tests := []struct {
		typ, url, want string
		hosted         bool
	}{
		{"openai", "https://api.openai.com/v1", "openai", true},
		{"openai", "https://myres.openai.azure.com/openai", "openai", true},
		{"openai", "https://openrouter.ai/api/v1", "openrouter", true},
		{"openai", "http://localhost:8000/v1", "", false},
		{"openai", "http://10.0.0.5/v1", "", false},
		{"anthropic", "https://proxy.example/v1", "anthropic", true},
		{"gemini", "", "gemini", true},
		{"mock", "", "", false},
	}
	for _, tt := range tests {
		f, ok := Builtin().FamilyOf(tt.typ, tt.url)
		if ok != tt.hosted || f.Name != tt.want || (ok && f.MaxOutput <= 0) {
			t.Errorf("FamilyOf(%s, %s) = %+v, %v", tt.typ, tt.url, f, ok)
		}
	}
}

func TestCost(t *testing.T) {
	gpt4o, _ := Builtin().find("gpt-4o")
	sonnet, _ := Builtin().find("claude-sonnet-4-5")
	flash, _ := Builtin().find("gemini-2.5-flash")
	flash8b, _ := Builtin().find("gemini-1.5-flash-8b")
	tests := []struct {
		name  string
		e     *Entry
		u     Usage
		media bool
		want  int64
	}{
		// 1000 in × 2.5 $/M = 2,500,000 n$; 500 out × 10 $/M = 5,000,000 n$.
		{"plain", gpt4o, Usage{Input: 1000, Output: 500}, false, 7_500_000},
		// 400 cached at 1.25 $/M = 500,000; 600 plain at 2.5 = 1,500,000.
		{"cache read", gpt4o, Usage{Input: 1000, Output: 0, CacheRead: 400}, false, 2_000_000},
		// gpt-4o has no cache-write price: charged at its highest rate (10 $/M).
		{"unpriced class at highest rate", gpt4o, Usage{Input: 100, CacheWrite: 100}, false, 1_000_000},
		{"anthropic cache write", sonnet, Usage{Input: 1000, CacheWrite: 1000}, false, 3_750_000},
		// Above 200k input tokens the long-context tier applies: 6 and 22.5 $/M.
		{"tier", sonnet, Usage{Input: 200_001, Output: 1000}, false, 1_200_006_000 + 22_500_000},
		{"media rate", flash, Usage{Input: 1000}, true, 1_000_000},
		{"ceil to the nano-dollar", flash8b, Usage{Input: 1}, false, 38}, // 37.5 n$ rounds up
		{"reasoning is inside output", gpt4o, Usage{Input: 0, Output: 100, Reasoning: 80}, false, 1_000_000},
	}
	for _, tt := range tests {
		got, ok := tt.e.Cost(tt.u, tt.media)
		if !ok || got != tt.want {
			t.Errorf("%s: cost = %d, %v; want %d", tt.name, got, ok, tt.want)
		}
	}
	if _, ok := (*Entry)(nil).Cost(Usage{Input: 1}, false); ok {
		t.Error("nil entry priced")
	}
	if got := tokenCost(1<<40, PerMillion(1e6)); got != MaxAmount {
		t.Errorf("overflow not saturated: %d", got)
	}
}

func TestFormatUSD(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1: "0.000000001", 1_500_000_000: "1.5", 100e9: "100", -250_000_000: "-0.25"} {
		if got := FormatUSD(n); got != want {
			t.Errorf("FormatUSD(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestTable(t *testing.T) {
	c := New(&config.Config{Pricing: map[string]map[string]*config.Price{"mock": {"demo": {Input: f64(1), Output: f64(2)}}}})
	rows := c.Rows()
	if rows[0].Provider != "mock" || rows[0].Model != "demo" || rows[0].Input != "1" || rows[0].Context != "-" {
		t.Errorf("first row = %+v", rows[0])
	}
	if len(rows) != len(Builtin().entries)+1 {
		t.Errorf("rows = %d", len(rows))
	}
	var buf bytes.Buffer
	if err := c.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "gemini-2.5-pro") || !strings.Contains(out, ">200000: 2.5/15") {
		t.Errorf("table:\n%s", out)
	}
}
