package limit

import (
	"strings"
	"testing"
)

// The estimate table of issue 5, item 3, case by case. A body's input part
// is ceil(characters of its compact form / 4).
func TestEstimateTokens(t *testing.T) {
	openai := Target{Type: "openai", Hosted: true, FamilyCeiling: 128000}
	known := Target{Type: "openai", Known: true, ModelCeiling: 16384, Hosted: true, FamilyCeiling: 128000}
	selfHosted := Target{Type: "openai"}
	anthropic := Target{Type: "anthropic", Known: true, ModelCeiling: 64000, Hosted: true, FamilyCeiling: 64000}
	gemini := Target{Type: "gemini", Hosted: true, FamilyCeiling: 65536}

	in := func(body string) int64 { return max(1, (InputChars([]byte(body))+3)/4) }
	tests := []struct {
		name       string
		body       string
		target     Target
		output     int64
		candidates int64
		max        bool
	}{
		{"max_completion_tokens wins", `{"model":"m","max_completion_tokens":100,"max_tokens":50}`, openai, 100, 1, false},
		{"null max_completion_tokens does not hide max_tokens", `{"max_completion_tokens":null,"max_tokens":50}`, openai, 50, 1, false},
		{"max_tokens", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":7}`, openai, 7, 1, false},
		{"responses max_output_tokens", `{"input":"hi","max_output_tokens":300}`, openai, 300, 1, false},
		{"gemini maxOutputTokens", `{"contents":[],"generationConfig":{"maxOutputTokens":256}}`, gemini, 256, 1, false},
		{"gemini snake container", `{"contents":[],"generation_config":{"max_output_tokens":64}}`, gemini, 64, 1, false},
		{"bedrock converse maxTokens", `{"messages":[],"inferenceConfig":{"maxTokens":300}}`, selfHosted, 300, 1, false},
		{"bedrock converse thinking widens the limit", `{"messages":[],"inferenceConfig":{"maxTokens":300},"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":2048}}}`, selfHosted, 2048, 1, false},
		{"zero is no limit", `{"max_tokens":0}`, openai, 128000, 1, false},
		{"zero beside another limit is still no limit", `{"max_completion_tokens":0,"max_tokens":50}`, openai, 128000, 1, false},
		{"gemini zero is no limit", `{"contents":[],"generationConfig":{"maxOutputTokens":0}}`, known, 16384, 1, false},
		{"string limit reserves the maximum", `{"max_tokens":"100"}`, openai, 0, 1, true},
		{"float limit reserves the maximum", `{"max_tokens":100.0}`, openai, 0, 1, true},
		{"exponent reserves the maximum", `{"max_completion_tokens":1e3}`, openai, 0, 1, true},
		{"negative reserves the maximum", `{"max_tokens":-5}`, openai, 0, 1, true},
		{"string beside a numeric one still reserves the maximum", `{"max_completion_tokens":"9","max_tokens":5}`, openai, 0, 1, true},
		{"n multiplies", `{"max_tokens":10,"n":3}`, openai, 10, 3, false},
		{"candidateCount multiplies", `{"generationConfig":{"maxOutputTokens":10,"candidateCount":4}}`, gemini, 10, 4, false},
		{"best_of multiplies (largest count)", `{"prompt":"x","max_tokens":10,"n":2,"best_of":5}`, openai, 10, 5, false},
		{"bestOf and candidate_count recognized", `{"max_tokens":10,"bestOf":2,"generation_config":{"candidate_count":3}}`, openai, 10, 3, false},
		{"float n reserves the maximum", `{"max_tokens":10,"n":2.5}`, openai, 0, 1, true},
		{"n of 0 counts as one", `{"max_tokens":10,"n":0}`, openai, 10, 1, false},
		{"anthropic default 8192", `{"messages":[]}`, anthropic, 8192, 1, false},
		{"known model catalog ceiling", `{"messages":[]}`, known, 16384, 1, false},
		{"unknown hosted model family ceiling", `{"messages":[]}`, openai, 128000, 1, false},
		{"unknown self-hosted model 1024", `{"messages":[]}`, selfHosted, 1024, 1, false},
		{"default times n", `{"messages":[],"n":2}`, selfHosted, 1024, 2, false},
		{"embeddings generate nothing", `{"input":"hello world"}`, Target{Type: "openai", NoOutput: true}, 0, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := EstimateTokens([]byte(tt.body), tt.target)
			if e.Max != tt.max {
				t.Fatalf("Max = %v, want %v (%+v)", e.Max, tt.max, e)
			}
			if tt.max {
				if e.Total != MaxEstimate {
					t.Errorf("Total = %d, want MaxEstimate", e.Total)
				}
				return
			}
			if e.Output != tt.output || e.Candidates != tt.candidates {
				t.Errorf("output %d × %d, want %d × %d", e.Output, e.Candidates, tt.output, tt.candidates)
			}
			if want := in(tt.body) + tt.output*tt.candidates; e.Total != want || e.Input != in(tt.body) {
				t.Errorf("Total = %d (input %d), want %d", e.Total, e.Input, want)
			}
		})
	}
}

func TestInputChars(t *testing.T) {
	tests := []struct {
		body  string
		chars int64
		input int64
	}{
		{`{}`, 2, 1},
		{"{ \"a\" :\n  \"b\" }", 9, 3}, // compacted to {"a":"b"}
		{`{"x":"héllo"}`, 13, 4},       // characters, not bytes
		{`not json  `, 7, 2},           // whitespace outside strings never counts
		{`{"a":" b\" c "}`, 15, 4},     // inside strings it does, escapes included
		{`{"content":"` + strings.Repeat("a", 4000) + `"}`, 4014, 1004},
	}
	for _, tt := range tests {
		if got := InputChars([]byte(tt.body)); got != tt.chars {
			t.Errorf("InputChars(%.20q) = %d, want %d", tt.body, got, tt.chars)
		}
		if got := EstimateTokens([]byte(tt.body), Target{NoOutput: true}).Input; got != tt.input {
			t.Errorf("Input(%.20q) = %d, want %d", tt.body, got, tt.input)
		}
	}
}
