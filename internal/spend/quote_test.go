package spend

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"switchboard/internal/config"
)

func compactLen(t *testing.T, body string) int64 {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(body)); err != nil {
		t.Fatal(err)
	}
	return int64(b.Len())
}

func TestQuoteBounds(t *testing.T) {
	c := New(&config.Config{Pricing: map[string]map[string]*config.Price{
		"m": {"priced": {Input: f64(1), Output: f64(2)}, "ceil": {Input: f64(1), Output: f64(2), MaxOutput: i64(500), Context: i64(4000)}},
	}})
	chat := `{"model":"gpt-4o","messages":[{"role":"user","content":"héllo"}],"max_tokens":100}`
	tests := []struct {
		name                string
		r                   Request
		input, output, cand int64
		amount              int64
	}{
		{"bytes plus allowance, request limit", Request{"openai", "openai", "gpt-4o", "chat/completions", []byte(chat)},
			compactLen(t, chat) + BaseAllowance + PerMessageAllowance, 100, 1, -1},
		{"catalog ceiling without a limit", Request{"openai", "openai", "gpt-4o-mini", "chat/completions", []byte(`{"messages":[]}`)},
			int64(len(`{"messages":[]}`)) + BaseAllowance, 16384, 1, -1},
		{"anthropic 8192 default", Request{"a", "anthropic", "claude-opus-4-1", "chat/completions", []byte(`{"messages":[]}`)},
			int64(len(`{"messages":[]}`)) + BaseAllowance, 8192, 1, -1},
		{"n candidates", Request{"openai", "openai", "gpt-4o", "chat/completions", []byte(`{"messages":[],"max_tokens":10,"n":3}`)},
			int64(len(`{"messages":[],"max_tokens":10,"n":3}`)) + BaseAllowance, 10, 3, -1},
		{"completions prompt list", Request{"openai", "openai", "gpt-3.5-turbo", "completions", []byte(`{"prompt":["a","b"],"max_tokens":10,"n":2}`)},
			int64(len(`{"prompt":["a","b"],"max_tokens":10,"n":2}`)) + BaseAllowance + 2*PerMessageAllowance, 10, 4, -1},
		{"tools allowance", Request{"openai", "openai", "gpt-4o", "chat/completions", []byte(`{"messages":[],"max_tokens":1,"tools":[{"type":"function","function":{"name":"f"}}]}`)},
			int64(len(`{"messages":[],"max_tokens":1,"tools":[{"type":"function","function":{"name":"f"}}]}`)) + BaseAllowance + ToolsAllowance, 1, 1, -1},
		{"media falls back to the context", Request{"openai", "openai", "gpt-4o", "chat/completions",
			[]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}],"max_tokens":10}`)},
			128000, 10, 1, -1},
		{"stored input falls back to the context", Request{"openai", "openai", "gpt-4.1", "responses", []byte(`{"input":"more","previous_response_id":"resp_1","max_output_tokens":5}`)},
			1047576, 5, 1, -1},
		{"context caps the byte bound", Request{"m", "openai", "ceil", "chat/completions", []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`)},
			4000, 500, 1, 4000*1000 + 500*2000},
		{"non-integer limit takes the ceiling", Request{"m", "openai", "ceil", "chat/completions", []byte(`{"messages":[],"max_tokens":"9"}`)},
			int64(len(`{"messages":[],"max_tokens":"9"}`)) + BaseAllowance, 500, 1, -1},
		{"embeddings have no output", Request{"openai", "openai", "text-embedding-3-small", "embeddings", []byte(`{"input":"abc"}`)},
			int64(len(`{"input":"abc"}`)) + BaseAllowance + PerMessageAllowance, 0, 1, -1},
		{"override prices exactly", Request{"m", "mock", "priced", "chat/completions", []byte(`{"messages":[],"max_tokens":1000}`)},
			int64(len(`{"messages":[],"max_tokens":1000}`)) + BaseAllowance, 1000, 1,
			(int64(len(`{"messages":[],"max_tokens":1000}`))+BaseAllowance)*1000 + 1000*2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := c.Quote(tt.r)
			if !q.Priced {
				t.Fatalf("unpriced: %s", q.Reason)
			}
			if q.InputBound != tt.input || q.OutputBound != tt.output || q.Candidates != tt.cand {
				t.Errorf("bounds = %d/%d×%d, want %d/%d×%d", q.InputBound, q.OutputBound, q.Candidates, tt.input, tt.output, tt.cand)
			}
			r := q.Entry.RatesAt(q.InputBound)
			want := tokenCost(q.InputBound, max(r.Input, r.CacheRead)) + tokenCost(q.OutputBound*q.Candidates, r.Output)
			if tt.amount >= 0 {
				want = tt.amount
			}
			if q.Amount != want {
				t.Errorf("amount = %d, want %d", q.Amount, want)
			}
		})
	}
}

func TestQuoteRatesAreUpperBounds(t *testing.T) {
	// Anthropic cache_control: input at the cache-write rate; a 1 h TTL at
	// twice the input rate.
	body := `{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[],"max_tokens":10}`
	q := Builtin().Quote(Request{"a", "anthropic", "claude-sonnet-4-5", "messages", []byte(body)})
	if want := tokenCost(q.InputBound, PerMillion(3.75)) + tokenCost(10, PerMillion(15)); q.Amount != want {
		t.Errorf("cache write: %d, want %d", q.Amount, want)
	}
	body = strings.Replace(body, `"ephemeral"`, `"ephemeral","ttl":"1h"`, 1)
	q = Builtin().Quote(Request{"a", "anthropic", "claude-sonnet-4-5", "messages", []byte(body)})
	if want := tokenCost(q.InputBound, PerMillion(6)) + tokenCost(10, PerMillion(15)); q.Amount != want {
		t.Errorf("1h cache write: %d, want %d", q.Amount, want)
	}
	// A bound past the long-context threshold is priced at that tier.
	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 210000) + `"}],"max_tokens":10}`
	q = Builtin().Quote(Request{"a", "anthropic", "claude-sonnet-4-5", "messages", []byte(big)})
	if want := tokenCost(q.InputBound, PerMillion(6)) + tokenCost(10, PerMillion(22.5)); q.Amount != want {
		t.Errorf("tier: %d, want %d", q.Amount, want)
	}
	// Audio input on a model with a media rate.
	audio := `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}],"max_tokens":10}`
	q = Builtin().Quote(Request{"g", "gemini", "gemini-2.5-flash", "chat/completions", []byte(audio)})
	if want := tokenCost(1048576, PerMillion(1)) + tokenCost(10, PerMillion(2.5)); !q.Media || q.Amount != want {
		t.Errorf("media: %d, want %d", q.Amount, want)
	}
}

// The unpriceable rules of issue 6, item 4, case by case.
func TestQuoteUnpriceable(t *testing.T) {
	c := New(&config.Config{Pricing: map[string]map[string]*config.Price{
		"m": {"noceil": {Input: f64(1), Output: f64(2)}},
	}})
	tests := []struct {
		name   string
		r      Request
		reason string
	}{
		{"unknown model", Request{"local", "openai", "my-finetune", "chat/completions", []byte(`{"messages":[],"max_tokens":5}`)}, "no price is known"},
		{"unknown output ceiling", Request{"m", "openai", "noceil", "chat/completions", []byte(`{"messages":[]}`)}, "output ceiling"},
		{"non-integer limit, unknown ceiling", Request{"m", "openai", "noceil", "chat/completions", []byte(`{"messages":[],"max_tokens":5.0}`)}, "not an integer"},
		{"media, unknown context", Request{"m", "openai", "noceil", "chat/completions", []byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}],"max_tokens":5}`)}, "context ceiling"},
		{"multi-candidate on anthropic", Request{"a", "anthropic", "claude-haiku-4-5", "chat/completions", []byte(`{"messages":[],"max_tokens":5,"n":2}`)}, "multi-candidate"},
		{"multi-candidate on responses", Request{"openai", "openai", "gpt-4o", "responses", []byte(`{"input":"x","max_output_tokens":5,"n":2}`)}, "multi-candidate"},
		{"float candidate count", Request{"openai", "openai", "gpt-4o", "chat/completions", []byte(`{"messages":[],"max_tokens":5,"n":2.0}`)}, "candidate count"},
		{"hosted tool (responses)", Request{"openai", "openai", "gpt-4o", "responses", []byte(`{"input":"x","max_output_tokens":5,"tools":[{"type":"web_search_preview"}]}`)}, `provider-hosted tool "web_search_preview"`},
		{"hosted tool (anthropic)", Request{"a", "anthropic", "claude-haiku-4-5", "messages", []byte(`{"messages":[],"max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`)}, "provider-hosted tool"},
		{"hosted tool (gemini)", Request{"g", "gemini", "gemini-2.5-pro", "chat/completions", []byte(`{"contents":[],"tools":[{"googleSearch":{}}],"generationConfig":{"maxOutputTokens":5}}`)}, `provider-hosted tool "googleSearch"`},
		{"web_search_options", Request{"openai", "openai", "gpt-4o", "chat/completions", []byte(`{"messages":[],"max_tokens":5,"web_search_options":{}}`)}, "provider-hosted"},
		{"priority tier", Request{"openai", "openai", "gpt-4o", "chat/completions", []byte(`{"messages":[],"max_tokens":5,"service_tier":"priority"}`)}, "service_tier"},
		{"audio output", Request{"openai", "openai", "gpt-4o", "chat/completions", []byte(`{"messages":[],"max_tokens":5,"modalities":["text","audio"]}`)}, "modalities"},
		{"openrouter fallback of unknown price", Request{"or", "openai", "openai/gpt-4o", "chat/completions", []byte(`{"messages":[],"max_tokens":5,"models":["a","b"]}`)}, `fallback model a: no price is known for model "a"`},
		{"openrouter models not a list of names", Request{"or", "openai", "openai/gpt-4o", "chat/completions", []byte(`{"messages":[],"max_tokens":5,"models":[1]}`)}, "variable routing"},
		{"unknown native control", Request{"openai", "openai", "gpt-4o", "chat/completions", []byte(`{"messages":[],"max_tokens":5,"guided_json":{}}`)}, `unknown native control "guided_json"`},
		{"unknown converse model field", Request{"b", "bedrock", "claude-haiku-4-5", "converse", []byte(`{"messages":[],"inferenceConfig":{"maxTokens":5},"additionalModelRequestFields":{"guardrails":{}}}`)}, "additionalModelRequestFields.guardrails"},
		{"unknown generationConfig control", Request{"g", "gemini", "gemini-2.5-pro", "chat/completions", []byte(`{"contents":[],"generationConfig":{"maxOutputTokens":5,"speechConfig":{}}}`)}, "generationConfig.speechConfig"},
		{"image output", Request{"g", "gemini", "gemini-2.5-flash", "chat/completions", []byte(`{"contents":[],"generationConfig":{"maxOutputTokens":5,"responseModalities":["TEXT","IMAGE"]}}`)}, "modalities"},
		{"not an object", Request{"openai", "openai", "gpt-4o", "chat/completions", []byte(`[1]`)}, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := c.Quote(tt.r)
			if q.Priced || !strings.Contains(q.Reason, tt.reason) {
				t.Errorf("quote = %+v, want unpriced with %q", q, tt.reason)
			}
		})
	}
	// The same requests without the offending part are priced.
	for _, body := range []string{
		`{"messages":[],"max_tokens":5,"tools":[{"type":"function","function":{"name":"f"}}],"service_tier":"flex","modalities":["text"]}`,
		`{"messages":[],"max_tokens":5,"tools":[{"name":"get","input_schema":{}},{"type":"bash_20250124","name":"bash"}]}`,
		`{"messages":[],"max_tokens":5,"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["x"]}`,
		`{"messages":[],"inferenceConfig":{"maxTokens":5},"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024},"top_k":5}}`,
	} {
		if q := c.Quote(Request{"openai", "openai", "gpt-4o", "chat/completions", []byte(body)}); !q.Priced {
			t.Errorf("%s: %s", body, q.Reason)
		}
	}
}

func TestHoldRules(t *testing.T) {
	gpt4o, _ := Builtin().find("gpt-4o")
	bill := func(n int64) *int64 { return &n }
	u := Usage{Input: 1000, Output: 500} // 7,500,000 n$ at catalog prices
	tests := []struct {
		name     string
		h        Hold
		partials []Usage
		final    Usage
		charge   int64
		resolved bool
		held     int64 // hold after partials
	}{
		{"catalog replaces the reservation", Hold{Held: 50_000_000, Entry: gpt4o}, nil, u, 7_500_000, true, 50_000_000},
		{"provider bill outranks the catalog", Hold{Held: 50_000_000, Entry: gpt4o}, nil, Usage{Input: 1000, Output: 500, CostNanoUSD: bill(4_000_000)}, 4_000_000, true, 50_000_000},
		{"partial usage raises, never lowers", Hold{Held: 5_000_000, Entry: gpt4o}, []Usage{{Input: 1000, Output: 1000}, {Input: 10}}, u, 7_500_000, true, 12_500_000},
		{"partial bill is a floor for the catalog", Hold{Held: 50_000_000, Entry: gpt4o}, []Usage{{CostNanoUSD: bill(9_000_000)}}, u, 9_000_000, true, 50_000_000},
		{"terminal bill may go below a partial floor", Hold{Held: 50_000_000, Entry: gpt4o}, []Usage{{CostNanoUSD: bill(9_000_000)}}, Usage{CostNanoUSD: bill(8_000_000)}, 8_000_000, true, 50_000_000},
		{"unpriced hold stays without a stated cost", Hold{Held: 1e9, Unpriced: true}, nil, u, 0, false, 1e9},
		{"unpriced hold resolved by a bill", Hold{Held: 1e9, Unpriced: true}, nil, Usage{CostNanoUSD: bill(3)}, 3, true, 1e9},
		// The catalog cannot state an unpriced attempt's fees (hosted
		// tools, say): only the provider's bill releases the hold; a
		// catalog price may only raise it.
		{"unpriced (hosted tools) not released by catalog usage", Hold{Held: 1e9, Unpriced: true, Entry: gpt4o}, nil, u, 0, false, 1e9},
		{"unpriced hold raised by catalog usage", Hold{Held: 1_000_000, Unpriced: true, Entry: gpt4o}, []Usage{u}, u, 0, false, 7_500_000},
		{"unpriced (hosted tools) released by a bill", Hold{Held: 1e9, Unpriced: true, Entry: gpt4o}, nil, Usage{Input: 1000, Output: 500, CostNanoUSD: bill(9)}, 9, true, 1e9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h
			for _, p := range tt.partials {
				h.Partial(p)
			}
			if h.Held != tt.held {
				t.Errorf("held after partials = %d, want %d", h.Held, tt.held)
			}
			charge, resolved := h.Settle(tt.final)
			if charge != tt.charge || resolved != tt.resolved {
				t.Errorf("settle = %d, %v; want %d, %v", charge, resolved, tt.charge, tt.resolved)
			}
		})
	}
	h := Hold{Held: 10, Entry: gpt4o}
	h.Partial(Usage{CostNanoUSD: bill(4)})
	if got := h.Fail(); got != 4 {
		t.Errorf("Fail = %d, want the partial bill 4", got)
	}
}

// Known charges what an attempt the gateway stopped is known to have
// cost, within the hold of a budgeted attempt, never below a partial
// bill; an unpriced hold without a bill stays.
func TestHoldKnown(t *testing.T) {
	gpt4o, _ := Builtin().find("gpt-4o")
	bill := func(n int64) *int64 { return &n }
	u := Usage{Input: 1000, Output: 500} // 7,500,000 n$
	tests := []struct {
		name     string
		h        Hold
		u        Usage
		charge   int64
		resolved bool
	}{
		{"known cost within the hold", Hold{Held: 50_000_000, Budgeted: true, Entry: gpt4o}, u, 7_500_000, true},
		{"never past the hold", Hold{Held: 5_000_000, Budgeted: true, Entry: gpt4o}, u, 5_000_000, true},
		{"unbudgeted: the known cost", Hold{Entry: gpt4o}, u, 7_500_000, true},
		{"a partial bill is a floor", Hold{Held: 50_000_000, Budgeted: true, Floor: 9_000_000, Entry: gpt4o}, u, 9_000_000, true},
		{"a bill is charged as stated", Hold{Held: 5_000_000, Budgeted: true, Entry: gpt4o}, Usage{CostNanoUSD: bill(6_000_000)}, 6_000_000, true},
		{"unpriced stays", Hold{Held: 1e9, Budgeted: true, Unpriced: true, Entry: gpt4o}, u, 0, false},
	}
	for _, tt := range tests {
		h := tt.h
		if charge, resolved := h.Known(tt.u); charge != tt.charge || resolved != tt.resolved {
			t.Errorf("%s: %d %v, want %d %v", tt.name, charge, resolved, tt.charge, tt.resolved)
		}
	}
}

func TestWithStreamUsage(t *testing.T) {
	tests := []struct {
		in, out string
		added   bool
	}{
		{`{"stream":true,"messages":[]}`, `{"stream":true,"messages":[],"stream_options":{"include_usage":true}}`, true},
		{`{"stream":true,"stream_options":{"include_usage":false}}`, `{"stream":true,"stream_options":{"include_usage":true}}`, true},
		{`{"stream":true,"stream_options":{"include_usage":true}}`, `{"stream":true,"stream_options":{"include_usage":true}}`, false},
		{`{"stream":false}`, `{"stream":false}`, false},
		{`{"messages":[]}`, `{"messages":[]}`, false},
	}
	for _, tt := range tests {
		out, added := WithStreamUsage([]byte(tt.in))
		if string(out) != tt.out || added != tt.added {
			t.Errorf("WithStreamUsage(%s) = %s, %v", tt.in, out, added)
		}
	}
}

func TestReportedBill(t *testing.T) {
	tests := []struct {
		doc  string
		want int64 // -1: nil
	}{
		{`{"usage":{"prompt_tokens":1,"cost":0.00012}}`, 120_000},
		{`{"usage":{"cost":0}}`, 0},
		{`{"usage":{"cost":"0.1"}}`, -1},
		{`{"usage":{"cost":-1}}`, -1},
		{`{"usage":{}}`, -1},
	}
	for _, tt := range tests {
		got := ReportedBill([]byte(tt.doc))
		if (got == nil) != (tt.want < 0) || (got != nil && *got != tt.want) {
			t.Errorf("ReportedBill(%s) = %v", tt.doc, got)
		}
	}
}

// hasMarker finds exactly what searching for each media marker finds.
func TestHasMarkerMatchesContains(t *testing.T) {
	bodies := []string{``, `"`, `{"a":"b"}`, `{"image_url":1}`, `x"input_audio"`, `{"type":"image"}`, `{"type":"images"}`,
		`{"content":"say \"image_url\" twice"}`, `{"type":"text","t":"file"}`, `"type":"container_upload"`, `"fileData"`, `"file_dat`}
	for _, m := range mediaMarkers {
		bodies = append(bodies, `{"x":`+string(m)+`}`, string(m[:len(m)-1]))
	}
	for _, b := range bodies {
		want := false
		for _, m := range mediaMarkers {
			want = want || bytes.Contains([]byte(b), m)
		}
		if got := hasMarker([]byte(b)); got != want {
			t.Errorf("hasMarker(%q) = %v, want %v", b, got, want)
		}
	}
}
