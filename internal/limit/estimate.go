package limit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

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

// outputFields are the recognized output limits in precedence order.
var outputFields = []string{
	"max_completion_tokens", "max_tokens", "max_output_tokens",
	"generationConfig.maxOutputTokens", "generationConfig.max_output_tokens",
	"generation_config.max_output_tokens", "generation_config.maxOutputTokens",
}

// candidateFields multiply the output allowance; the largest applies.
var candidateFields = []string{
	"n", "best_of", "bestOf", "candidate_count",
	"generationConfig.candidateCount", "generationConfig.candidate_count",
	"generation_config.candidate_count", "generation_config.candidateCount",
}

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

// OutputLimit resolves the request's own output limit: the first numeric
// field in precedence order; ok false when none is given; max true when a
// recognized field holds anything but an unsigned integer (or null).
func OutputLimit(body []byte) (limit int64, ok, maxed bool) {
	found := false
	for _, r := range gjson.GetManyBytes(body, outputFields...) {
		if !present(r) {
			continue
		}
		v, isInt := UnsignedInt(r)
		if !isInt {
			return 0, false, true
		}
		if !found {
			limit, found = v, true
		}
	}
	return limit, found, false
}

// Candidates returns the generated candidate count (at least 1); max is
// true when a candidate field is not an unsigned integer.
func Candidates(body []byte) (n int64, maxed bool) {
	n = 1
	for _, r := range gjson.GetManyBytes(body, candidateFields...) {
		if !present(r) {
			continue
		}
		v, isInt := UnsignedInt(r)
		if !isInt {
			return 1, true
		}
		n = max(n, v)
	}
	return n, false
}

// InputChars counts the characters of the body's compact serialization
// (the body as is when it is not valid JSON).
func InputChars(body []byte) int64 {
	var buf bytes.Buffer
	if err := json.Compact(&buf, body); err == nil {
		body = buf.Bytes()
	}
	return int64(utf8.RuneCount(body))
}

// EstimateTokens is the TPM estimate of the final provider-native body:
// input characters / 4, plus the effective output limit times the
// candidate count. The output limit is max_completion_tokens when numeric,
// else max_tokens, else max_output_tokens or Gemini's
// generationConfig.maxOutputTokens; a non-integer representation of any of
// them (or of a candidate count) reserves MaxEstimate. Without a limit:
// 8192 for Anthropic, the catalog ceiling of a known model, the family
// ceiling of an unknown hosted model, 1024 for an unknown self-hosted one.
func EstimateTokens(body []byte, t Target) Estimate {
	e := Estimate{Input: max(1, (InputChars(body)+3)/4), Candidates: 1}
	if t.NoOutput {
		e.Total = e.Input
		return e
	}
	lim, ok, maxed := OutputLimit(body)
	n, nMax := Candidates(body)
	if maxed || nMax {
		e.Max, e.Total = true, MaxEstimate
		return e
	}
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
