package spend

import (
	"strings"
	"testing"

	"switchboard/internal/config"
)

// TestQuoteSeedParity covers what llmshim users would otherwise miss:
// native reasoning budgets count in the output bound, an OpenRouter
// models list is priced at its dearest model instead of refused, and
// n > 1 is priced as n × the output bound (a true upper bound; llmshim
// refuses it as unpriceable).
func TestQuoteSeedParity(t *testing.T) {
	c := New(&config.Config{Pricing: map[string]map[string]*config.Price{
		"or": {
			"cheap":  {Input: f64(1), Output: f64(1), MaxOutput: i64(1000), Context: i64(100000)},
			"costly": {Input: f64(1), Output: f64(10), MaxOutput: i64(4000), Context: i64(100000)},
		},
		"g": {"gem": {Input: f64(1), Output: f64(2), MaxOutput: i64(65536), Context: i64(1000000)}},
		"a": {"cl": {Input: f64(3), Output: f64(15), MaxOutput: i64(64000), Context: i64(200000)}},
	}})
	tests := []struct {
		name   string
		r      Request
		output int64 // output bound per candidate
		cand   int64
		reason string // unpriceable when set
	}{
		{"gemini thinking budget above the visible limit", Request{"g", "gemini", "gem", "generateContent",
			[]byte(`{"contents":[],"generationConfig":{"maxOutputTokens":100,"thinkingConfig":{"thinkingBudget":24576}}}`)}, 24576, 1, ""},
		{"anthropic thinking within max_tokens", Request{"a", "anthropic", "cl", "messages",
			[]byte(`{"messages":[],"max_tokens":8192,"thinking":{"type":"enabled","budget_tokens":4096}}`)}, 8192, 1, ""},
		{"reasoning_effort high", Request{"or", "openai", "cheap", "chat/completions",
			[]byte(`{"messages":[],"max_tokens":100,"reasoning_effort":"high"}`)}, 24576, 1, ""},
		{"gemini candidates on the native endpoint", Request{"g", "gemini", "gem", "generateContent",
			[]byte(`{"contents":[],"generationConfig":{"maxOutputTokens":50,"candidateCount":3}}`)}, 50, 3, ""},
		{"n=4 is four outputs", Request{"or", "openai", "cheap", "chat/completions",
			[]byte(`{"messages":[],"max_tokens":100,"n":4}`)}, 100, 4, ""},
		{"models: the dearest listed model's ceiling", Request{"or", "openai", "cheap", "chat/completions",
			[]byte(`{"messages":[],"models":["costly","cheap"]}`)}, 4000, 1, ""},
		{"models: one unknown is unpriceable", Request{"or", "openai", "cheap", "chat/completions",
			[]byte(`{"messages":[],"models":["nobody/knows"]}`)}, 0, 0, "fallback model nobody/knows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := c.Quote(tt.r)
			if tt.reason != "" {
				if q.Priced || !strings.Contains(q.Reason, tt.reason) {
					t.Fatalf("%+v, want unpriceable with %q", q, tt.reason)
				}
				return
			}
			if !q.Priced || q.OutputBound != tt.output || q.Candidates != tt.cand {
				t.Fatalf("priced %v (%s), output %d × %d, want %d × %d", q.Priced, q.Reason, q.OutputBound, q.Candidates, tt.output, tt.cand)
			}
			rates := q.Entry.RatesAt(q.InputBound)
			if want := tokenCost(q.InputBound, max(rates.Input, rates.CacheRead)) + tokenCost(q.OutputBound*q.Candidates, rates.Output); q.Amount != want {
				t.Fatalf("amount %d, want %d", q.Amount, want)
			}
		})
	}
}

// The TPM estimate of an OpenRouter models list reserves the largest
// output ceiling among the listed models, a million tokens for one the
// catalog does not know, and nothing extra without such a list.
func TestFallbackCeiling(t *testing.T) {
	c := New(&config.Config{Pricing: map[string]map[string]*config.Price{
		"or": {
			"cheap":  {Input: f64(1), Output: f64(1), MaxOutput: i64(1000), Context: i64(100000)},
			"costly": {Input: f64(1), Output: f64(10), MaxOutput: i64(4000), Context: i64(100000)},
		},
	}})
	for _, tt := range []struct {
		name, typ, body string
		want            int64
	}{
		{"known models: the largest ceiling", "openai", `{"models":["cheap","costly"]}`, 4000},
		{"one unknown model", "openai", `{"models":["cheap","nobody/knows"]}`, UnknownFallbackCeiling},
		{"no list", "openai", `{"model":"cheap"}`, 0},
		{"not a list of names", "openai", `{"models":[1]}`, 0},
		{"not an OpenAI-compatible provider", "anthropic", `{"models":["costly"]}`, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.FallbackCeiling("or", tt.typ, []byte(tt.body)); got != tt.want {
				t.Fatalf("ceiling %d, want %d", got, tt.want)
			}
		})
	}
}
