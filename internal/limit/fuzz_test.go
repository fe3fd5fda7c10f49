package limit

import "testing"

// FuzzEstimateTokens: any request body gets an estimate within
// [1, MaxEstimate], whatever its limits say, and nothing panics.
func FuzzEstimateTokens(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hello there"}],"max_tokens":100,"n":2}`), "openai")
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"max_completion_tokens":1e300}`), "openai")
	f.Add([]byte(`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":-1,"candidateCount":"9"}}`), "gemini")
	f.Add([]byte(`{"max_tokens":9223372036854775807,"n":9223372036854775807}`), "anthropic")
	f.Add([]byte(`[`), "mock")
	f.Fuzz(func(t *testing.T, body []byte, typ string) {
		for _, tg := range []Target{{Type: typ}, {Type: typ, Known: true, ModelCeiling: 1 << 20}, {Type: typ, Hosted: true, FamilyCeiling: 4096}, {Type: typ, NoOutput: true}} {
			e := EstimateTokens(body, tg)
			if e.Total < 1 || e.Total > MaxEstimate || e.Input < 1 {
				t.Fatalf("estimate %+v for %q", e, body)
			}
			if !e.Max && !tg.NoOutput && e.Total < e.Input {
				t.Fatalf("total below input: %+v", e)
			}
		}
	})
}
