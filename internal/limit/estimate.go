package limit

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// Output defaults of the token estimate when a request states no limit.
const (
	// AnthropicDefaultOutput is what the Anthropic translator sends as
	// max_tokens when the client gave none.
	AnthropicDefaultOutput = 8192
	// SelfHostedDefaultOutput is assumed for an unknown model on a
	// self-hosted server, whose launch configuration is not visible.
	SelfHostedDefaultOutput = 1024
	// MaxEstimate is the estimate of a request whose output limit is not
	// an unsigned JSON integer; a bucket clamps it to its capacity, so such
	// a request takes a whole bucket.
	MaxEstimate = 1 << 40
)

// Target describes where a body is sent, for the output default.
type Target struct {
	// Type is the provider type (openai, anthropic, gemini, mock).
	Type string
	// Known is true when the catalog knows the model; ModelCeiling is then
	// its output ceiling.
	Known        bool
	ModelCeiling int64
	// Hosted is true for a known hosted API (api.openai.com, ...): an
	// unknown model there gets FamilyCeiling. Otherwise the server is
	// taken as self-hosted.
	Hosted        bool
	FamilyCeiling int64
	// NoOutput is set for endpoints that generate no tokens (embeddings).
	NoOutput bool
	// FallbackCeiling is the largest output ceiling of the models an
	// OpenRouter models list may route to (one million tokens for one the
	// catalog does not know); it widens the default when the request sets
	// no limit. 0 = no such list.
	FallbackCeiling int64
}

// Estimate is the conservative token count of one request for TPM
// admission. The forwarded request is never changed by it.
type Estimate struct {
	// Input is ceil(characters of the compact serialized body / 4), at
	// least 1.
	Input int64
	// Output is the effective output limit of one candidate.
	Output int64
	// Candidates multiplies Output (n, best_of, candidateCount ...).
	Candidates int64
	// Max is set when a limit was not an unsigned integer: Total is then
	// MaxEstimate.
	Max bool
	// Total = Input + Output×Candidates, or MaxEstimate.
	Total int64
}

// Recognized output limits in precedence order, at the top level and in
// Gemini's generation config (either spelling of either).
var (
	outputKeys    = []string{"max_completion_tokens", "max_tokens", "max_output_tokens"}
	genOutputKeys = []string{"maxOutputTokens", "max_output_tokens"}
	candidateKeys = map[string]bool{"n": true, "best_of": true, "bestOf": true, "candidate_count": true}
	genCandKeys   = map[string]bool{"candidateCount": true, "candidate_count": true}
)

// UnsignedInt reads a JSON value as an unsigned integer written in digits
// only: "100" (a string), 100.0, 1e3 and -1 are not.
func UnsignedInt(r gjson.Result) (int64, bool) {
	if r.Type != gjson.Number || r.Raw == "" {
		return 0, false
	}
	for i := 0; i < len(r.Raw); i++ {
		if r.Raw[i] < '0' || r.Raw[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(r.Raw, 10, 64)
	return v, err == nil
}

// present reports whether a field exists with a non-null value.
func present(r gjson.Result) bool { return r.Exists() && r.Type != gjson.Null }

// Limits are the output limit and candidate count a body states.
type Limits struct {
	// Output is the first unsigned integer among max_completion_tokens,
	// max_tokens, max_output_tokens and generationConfig.maxOutputTokens
	// (Bedrock Converse: inferenceConfig.maxTokens);
	// HasOutput is false when none is given (or all are null), or when
	// any of them is 0, which providers do not honour as a limit.
	Output    int64
	HasOutput bool
	// OutputField names the field Output came from (max_tokens,
	// generationConfig.maxOutputTokens, ...); "" when none.
	OutputField string
	// Candidates is the largest of n, best_of, bestOf, candidate_count and
	// generationConfig.candidateCount, at least 1.
	Candidates int64
	// OutputMaxed and CandidatesMaxed are set when such a field holds
	// something other than an unsigned integer or null: the estimate is
	// then the maximum.
	OutputMaxed, CandidatesMaxed bool
	// Reasoning is the largest native reasoning budget the body states:
	// Anthropic's thinking.budget_tokens (also under Converse's
	// additionalModelRequestFields), Gemini's
	// generationConfig.thinkingConfig.thinkingBudget, or OpenAI's
	// reasoning_effort as Gemini maps it (low 1024, medium 8192, high
	// 24576 tokens). Reasoning is billed as output, so it counts in the
	// output allowance (see Allowance).
	Reasoning int64
}

// effortBudget is reasoning_effort in tokens, as Gemini's OpenAI
// compatibility maps it (the largest of the mappings Switchboard knows).
var effortBudget = map[string]int64{"low": 1024, "medium": 8192, "high": 24576, "xhigh": 32768}

// Allowance is an output limit widened to the reasoning budget: a request
// may think for its whole budget even when its visible output is capped
// lower.
func (l Limits) Allowance(lim int64) int64 { return max(lim, l.Reasoning) }

// Maxed reports whether any recognized field forces the maximum estimate.
func (l Limits) Maxed() bool { return l.OutputMaxed || l.CandidatesMaxed }

// ReadLimits reads a body's output limit and candidate count in one pass
// over its top-level fields.
func ReadLimits(body []byte) Limits {
	l := Limits{Candidates: 1}
	var outs [4]gjson.Result // by precedence: the three keys, then the generation config's
	cand := func(v gjson.Result) {
		if !present(v) {
			return
		}
		n, ok := UnsignedInt(v)
		if !ok {
			l.CandidatesMaxed = true
			return
		}
		l.Candidates = max(l.Candidates, n)
	}
	gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		switch {
		case candidateKeys[key]:
			cand(v)
		case key == "thinking":
			if b, ok := UnsignedInt(v.Get("budget_tokens")); ok {
				l.Reasoning = max(l.Reasoning, b)
			}
		case key == "reasoning_effort":
			l.Reasoning = max(l.Reasoning, effortBudget[v.String()])
		case key == "reasoning":
			l.Reasoning = max(l.Reasoning, effortBudget[v.Get("effort").String()])
		case key == "inferenceConfig":
			// Bedrock Converse: the limit and, for Claude, the thinking
			// budget in the model's own fields.
			if mt := v.Get("maxTokens"); present(mt) {
				outs[3] = mt
			}
		case key == "additionalModelRequestFields":
			if b, ok := UnsignedInt(v.Get("thinking.budget_tokens")); ok {
				l.Reasoning = max(l.Reasoning, b)
			}
		case key == "generationConfig" || key == "generation_config":
			v.ForEach(func(gk, gv gjson.Result) bool {
				switch n := gk.String(); {
				case n == "thinkingConfig" || n == "thinking_config":
					for _, f := range []string{"thinkingBudget", "thinking_budget"} {
						if b, ok := UnsignedInt(gv.Get(f)); ok {
							l.Reasoning = max(l.Reasoning, b)
						}
					}
				case genCandKeys[n]:
					cand(gv)
				case n == genOutputKeys[0] || n == genOutputKeys[1]:
					if present(gv) {
						outs[3] = gv
					}
				}
				return true
			})
		default:
			for i, ok := range outputKeys {
				if key == ok {
					outs[i] = v
				}
			}
		}
		return true
	})
	zero := false
	for i, r := range outs {
		if !present(r) {
			continue
		}
		v, ok := UnsignedInt(r)
		if !ok {
			l.OutputMaxed = true
			continue
		}
		zero = zero || v == 0
		if !l.HasOutput {
			l.Output, l.HasOutput = v, true
			l.OutputField = "generationConfig.maxOutputTokens"
			if i < len(outputKeys) {
				l.OutputField = outputKeys[i]
			}
		}
	}
	if zero {
		// Providers read a limit of 0 as "unset" (or refuse it) rather
		// than generating nothing: reserving 0 would bill output the
		// reservation never covered. Absent, the model's ceiling applies.
		l.Output, l.HasOutput, l.OutputField = 0, false, ""
	}
	return l
}

// OutputLimit resolves the request's own output limit: the first numeric
// field in precedence order; ok false when none is given; max true when a
// recognized field holds anything but an unsigned integer (or null).
func OutputLimit(body []byte) (limit int64, ok, maxed bool) {
	l := ReadLimits(body)
	if l.OutputMaxed {
		return 0, false, true
	}
	return l.Output, l.HasOutput, false
}

// Candidates returns the generated candidate count (at least 1); max is
// true when a recognized field is not an unsigned integer.
func Candidates(body []byte) (n int64, maxed bool) {
	l := ReadLimits(body)
	return l.Candidates, l.CandidatesMaxed
}

// InputChars counts the characters (runes) of the body's compact
// serialization: whitespace outside strings does not count.
func InputChars(body []byte) int64 {
	var n int64
	in, esc := false, false
	for _, c := range body {
		if c&0xC0 == 0x80 {
			continue // a UTF-8 continuation byte: same character
		}
		switch {
		case in:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
		case c == '"':
			in = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		n++
	}
	return n
}

// EstimateTokens is the TPM estimate of the final provider-native body:
// input characters / 4, plus the effective output limit times the
// candidate count. The output limit is max_completion_tokens when numeric,
// else max_tokens, else max_output_tokens or Gemini's
// generationConfig.maxOutputTokens (a 0 in any of them counts as no limit);
// a non-integer representation of any of
// them (or of a candidate count) reserves MaxEstimate. Without a limit:
// 8192 for Anthropic, the catalog ceiling of a known model, the family
// ceiling of an unknown hosted model, 1024 for an unknown self-hosted one.
func EstimateTokens(body []byte, t Target) Estimate {
	e := Estimate{Input: max(1, (InputChars(body)+3)/4), Candidates: 1}
	if t.NoOutput {
		e.Total = e.Input
		return e
	}
	l := ReadLimits(body)
	if l.Maxed() {
		e.Max, e.Total = true, MaxEstimate
		return e
	}
	lim, ok, n := l.Output, l.HasOutput, l.Candidates
	switch {
	case ok:
	case t.Type == "anthropic":
		lim = AnthropicDefaultOutput
	case t.Known:
		lim = t.ModelCeiling
	case t.Hosted:
		lim = t.FamilyCeiling
	default:
		lim = SelfHostedDefaultOutput
	}
	if !ok {
		lim = max(lim, t.FallbackCeiling)
	}
	lim = l.Allowance(lim)
	e.Output, e.Candidates = lim, n
	e.Total = satAdd(e.Input, satMul(lim, n))
	if e.Total > MaxEstimate {
		e.Total = MaxEstimate
	}
	return e
}

func satMul(a, b int64) int64 {
	if a != 0 && b > MaxEstimate/a {
		return MaxEstimate
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	if a > MaxEstimate-b {
		return MaxEstimate
	}
	return a + b
}
