package limit

import (
	"testing"
	"time"
)

// TestSlidingSeedExample is MultiLLM's two-requests-per-minute example:
// admitted with Remaining 1, Reset 60; 17 s later the second admission
// leaves Remaining 0 and the refusal after it waits 43 s, until the first
// admission leaves the window. The bucket gives 30 s then 60 s instead.
func TestSlidingSeedExample(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name      string
		sliding   bool
		resets    []time.Duration // after the admissions at t0 and t0+17s
		wait      time.Duration   // of the refusal at t0+17s
		admitAt60 bool            // a third request at t0+60s
	}{
		{"sliding", true, []time.Duration{60 * time.Second, 43 * time.Second}, 43 * time.Second, true},
		{"bucket", false, []time.Duration{30 * time.Second, 43 * time.Second}, 13 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemory()
			d := Debit{Key: "t:acme:rpm", Rate: Rate{Limit: 2, Window: time.Minute, Sliding: tt.sliding}, Cost: 1}
			for i, at := range []time.Time{t0, t0.Add(17 * time.Second)} {
				r := m.Take(at, []Debit{d}, nil)
				if r.Refused != -1 {
					t.Fatalf("admission %d refused", i)
				}
				if s := r.Snapshots[0]; s.Remaining != int64(1-i) || s.Reset.Round(time.Second) != tt.resets[i] {
					t.Fatalf("admission %d: remaining %d reset %v, want %d %v", i, s.Remaining, s.Reset, 1-i, tt.resets[i])
				}
			}
			r := m.Take(t0.Add(17*time.Second), []Debit{d}, nil)
			if r.Refused != 0 || r.Snapshot.Remaining != 0 || r.Snapshot.Wait.Round(time.Second) != tt.wait {
				t.Fatalf("refusal: %+v, want wait %v", r, tt.wait)
			}
			if r := m.Take(t0.Add(60*time.Second), []Debit{d}, nil); (r.Refused == -1) != tt.admitAt60 {
				t.Fatalf("at 60 s: %+v", r)
			}
		})
	}
}

// TestSlidingTokens: a TPM window takes costs, refunds an over-estimate
// from the newest admission, and frees each admission exactly a window
// after it.
func TestSlidingTokens(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	m := NewMemory()
	d := func(c int64) Debit {
		return Debit{Key: "g:tpm", Rate: Rate{Limit: 1000, Window: time.Minute, Sliding: true}, Cost: c}
	}
	m.Take(t0, []Debit{d(600)}, nil)
	m.Adjust(t0.Add(time.Second), d(0), -500) // used 100 of the 600 estimated
	if r := m.Take(t0.Add(10*time.Second), []Debit{d(800)}, nil); r.Refused != -1 || r.Snapshots[0].Remaining != 100 {
		t.Fatalf("after the refund: %+v", r)
	}
	r := m.Take(t0.Add(20*time.Second), []Debit{d(200)}, nil)
	if r.Refused != 0 || r.Snapshot.Wait != 40*time.Second {
		t.Fatalf("want a 40 s wait (the first admission leaves at 60 s): %+v", r)
	}
	if r := m.Take(t0.Add(60*time.Second), []Debit{d(200)}, nil); r.Refused != -1 {
		t.Fatalf("at 60 s: %+v", r)
	}
}

// TestSlidingBounded: a window's log stays bounded however many
// admissions it holds, and the count stays exact.
func TestSlidingBounded(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	m := NewMemory()
	d := Debit{Key: "g:tpm", Rate: Rate{Limit: 1 << 40, Window: time.Minute, Sliding: true}, Cost: 1}
	for i := range 3 * maxSlideEntries {
		m.Take(t0.Add(time.Duration(i)*time.Millisecond), []Debit{d}, nil)
	}
	s := m.slides["g:tpm"]
	if len(s.entries) > maxSlideEntries || s.used != 3*maxSlideEntries {
		t.Fatalf("%d entries, used %d", len(s.entries), s.used)
	}
}

// TestEstimateReasoningAndFallbacks: native reasoning budgets widen the
// output allowance, and an OpenRouter models list without a limit takes
// the largest listed ceiling.
func TestEstimateReasoningAndFallbacks(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		target Target
		output int64
	}{
		{"anthropic budget_tokens under max_tokens", `{"max_tokens":8192,"thinking":{"type":"enabled","budget_tokens":4096}}`, Target{Type: "anthropic"}, 8192},
		{"gemini thinkingBudget over maxOutputTokens", `{"generationConfig":{"maxOutputTokens":100,"thinkingConfig":{"thinkingBudget":24576}}}`, Target{Type: "gemini"}, 24576},
		{"reasoning_effort medium", `{"max_completion_tokens":500,"reasoning_effort":"medium"}`, Target{Type: "openai"}, 8192},
		{"responses reasoning.effort", `{"max_output_tokens":500,"reasoning":{"effort":"low"}}`, Target{Type: "openai"}, 1024},
		{"no budget", `{"max_tokens":300}`, Target{Type: "openai"}, 300},
		{"models list without a limit", `{"models":["x","y"]}`, Target{Type: "openai", Known: true, ModelCeiling: 4096, FallbackCeiling: 1_000_000}, 1_000_000},
		{"models list with a limit", `{"models":["x","y"],"max_tokens":50}`, Target{Type: "openai", FallbackCeiling: 1_000_000}, 50},
	}
	for _, tt := range tests {
		if e := EstimateTokens([]byte(tt.body), tt.target); e.Output != tt.output {
			t.Errorf("%s: output %d, want %d", tt.name, e.Output, tt.output)
		}
	}
}
