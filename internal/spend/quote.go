package spend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/bits"

	"github.com/tidwall/gjson"

	"switchboard/internal/config"
	"switchboard/internal/limit"
)

// Template allowances of the input bound, in tokens: a chat template adds
// role markers and separators that are not in the JSON, and tool
// definitions are rendered with a system preamble.
const (
	BaseAllowance       = 64
	PerMessageAllowance = 16
	ToolsAllowance      = 1024
)

// Request is one provider attempt to price.
type Request struct {
	Provider     string // provider name (config key)
	ProviderType string // openai, anthropic, gemini, mock
	Model        string // the provider's model name
	Endpoint     string // chat/completions, completions, responses, embeddings, messages
	Body         []byte // the body as sent
}

// Quote is the reservation of one attempt: a true upper bound of its cost
// under the catalog, or the reason none exists.
type Quote struct {
	// Amount in nano-USD; meaningful when Priced.
	Amount int64
	Priced bool
	// Reason says why the cost cannot be bounded (for the 400 message).
	Reason string
	// Entry is the model's pricing, nil when unknown. An unpriceable quote
	// may still have one (e.g. provider-hosted tools).
	Entry *Entry
	// InputBound, OutputBound (per candidate) and Candidates in tokens.
	InputBound, OutputBound, Candidates int64
	// Reasoning is the reasoning budget the body states (thinking,
	// reasoning_effort): the output bound is never below it.
	Reasoning int64
	// OutputField names the body's output limit field ("" when it sets
	// none): the one a smaller limit goes in.
	OutputField string
	// Media is set when the body carries media input.
	Media bool
	// inputCost, inputRate and outputRate (nano-USD per million tokens;
	// output times the candidates) let OutputFit say which output limit
	// would fit.
	inputCost, inputRate, outputRate int64
}

// OutputFit is the largest output limit (max_tokens) whose reservation
// fits within budget nano-USD, or 0 when not even the input fits. It is
// meaningful for a priced quote with an output bound.
func (q Quote) OutputFit(budget int64) int64 {
	left := q.outputRoom(budget)
	if !q.Priced || q.outputRate <= 0 || left <= 0 {
		return 0
	}
	// tokens·rate/1e6 ≤ left, rounded down (tokenCost rounds up).
	hi, lo := bits.Mul64(uint64(left), 1_000_000)
	if hi >= uint64(q.outputRate) {
		return q.OutputBound
	}
	n, _ := bits.Div64(hi, lo, uint64(q.outputRate))
	return min(int64(n), q.OutputBound)
}

// InputFits reports whether the input bound alone fits within budget
// nano-USD, so that it is the output (its limit or the candidates) that
// does not.
func (q Quote) InputFits(budget int64) bool {
	return q.Priced && q.outputRoom(budget) > 0
}

// outputRoom is what budget leaves for output once the input is reserved.
func (q Quote) outputRoom(budget int64) int64 {
	// Setting max_tokens lengthens the body, and so the input bound, by
	// at most this many bytes (`"max_completion_tokens":NNNNNNNNN,`).
	const field = 36
	return budget - q.inputCost - tokenCost(field, q.inputRate)
}

func unpriced(q Quote, format string, args ...any) Quote {
	q.Priced, q.Amount, q.Reason = false, 0, fmt.Sprintf(format, args...)
	return q
}

// multiCandidate reports whether n candidates are billed as n outputs (one
// input) for this endpoint and provider type.
func multiCandidate(r Request) bool {
	switch r.ProviderType {
	case config.TypeAnthropic:
		return false
	case config.TypeGemini:
		return r.Endpoint == "chat/completions" || r.Endpoint == "generateContent"
	}
	return r.Endpoint == "chat/completions" || r.Endpoint == "completions"
}

// Quote bounds an attempt's cost. Input tokens are at most min(context
// ceiling, UTF-8 bytes of the serialized body + template allowance),
// since a byte-level BPE token spans at least one byte; media and stored
// input fall back to the context ceiling. Output is the request's limit
// (Anthropic's 8192 default, else the catalog ceiling) times the
// candidates. Everything is priced at the tier the input bound reaches,
// input at the highest input-side rate that can apply.
func (c *Catalog) Quote(r Request) Quote {
	if models, ok := FallbackModels(r.ProviderType, r.Body); ok {
		return c.quoteFallbacks(r, models)
	}
	q := Quote{Candidates: 1}
	e, ok := c.Lookup(r.Provider, r.Model)
	if ok {
		q.Entry = e
	}
	if reason := controlsReason(r.Body); reason != "" {
		return unpriced(q, "%s", reason)
	}
	if !ok {
		return unpriced(q, "no price is known for model %q on provider %q", r.Model, r.Provider)
	}
	if !e.Priced() {
		return unpriced(q, "the price of model %q on provider %q lacks its input or output rate", r.Model, r.Provider)
	}
	compact := compacted(r.Body)

	top := readTop(compact)
	media, stored := inputShape(compact, &top)
	q.Media = media
	if media || stored {
		if e.Context == Unknown {
			return unpriced(q, "the request carries media or stored input and the context ceiling of %q is unknown", r.Model)
		}
		q.InputBound = e.Context
	} else {
		q.InputBound = int64(len(compact)) + allowance(&top)
		if e.Context != Unknown {
			q.InputBound = min(q.InputBound, e.Context)
		}
	}

	if r.Endpoint != "embeddings" {
		l := limit.ReadLimits(r.Body)
		lim, has, maxed, n := l.Output, l.HasOutput, l.OutputMaxed, l.Candidates
		if l.CandidatesMaxed {
			return unpriced(q, "the candidate count is not an integer")
		}
		if n > 1 && !multiCandidate(r) {
			return unpriced(q, "multi-candidate output is not supported for %s on a %s provider", r.Endpoint, r.ProviderType)
		}
		switch {
		case maxed:
			// The provider may coerce it; only the ceiling bounds that.
			if e.MaxOutput == Unknown {
				return unpriced(q, "the output limit is not an integer and the output ceiling of %q is unknown", r.Model)
			}
			lim = e.MaxOutput
		case has:
		case r.ProviderType == config.TypeAnthropic:
			lim = limit.AnthropicDefaultOutput
		case e.MaxOutput != Unknown:
			lim = e.MaxOutput
		default:
			return unpriced(q, "the request sets no output limit and the output ceiling of %q is unknown", r.Model)
		}
		q.OutputBound, q.Candidates = l.Allowance(lim), max(n, 1)*prompts(r, &top)
		q.Reasoning, q.OutputField = l.Reasoning, l.OutputField
	}

	rates := e.RatesAt(q.InputBound)
	in := max(rates.Input, rates.CacheRead)
	if writes, hour := cacheWrites(compact); writes {
		cw := known(rates.CacheWrite, rates)
		if hour {
			cw = max(cw, 2*rates.Input)
		}
		in = max(in, cw)
	}
	if media && rates.InputMedia != Unknown {
		in = max(in, rates.InputMedia)
	}
	out := q.OutputBound
	if q.Candidates > 1 {
		if out > MaxAmount/q.Candidates {
			out = MaxAmount
		} else {
			out *= q.Candidates
		}
	}
	q.inputCost, q.inputRate = tokenCost(q.InputBound, in), in
	q.outputRate = rates.Output
	if q.Candidates > 1 {
		q.outputRate = MaxAmount
		if rates.Output <= MaxAmount/q.Candidates {
			q.outputRate = rates.Output * q.Candidates
		}
	}
	q.Amount = addSat(q.inputCost, tokenCost(out, rates.Output))
	q.Priced = true
	return q
}

// compacted is body without insignificant whitespace: body itself when it
// has none (SDKs and proxies mostly send compact JSON: one scan, no copy),
// else a compacted copy (body when it does not parse).
func compacted(body []byte) []byte {
	if !hasSpace(body) {
		return body
	}
	var buf bytes.Buffer
	if json.Compact(&buf, body) == nil {
		return buf.Bytes()
	}
	return body
}

// hasSpace reports whitespace outside JSON strings.
func hasSpace(b []byte) bool {
	in, esc := false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return true
		}
	}
	return false
}

// topLevel holds the top-level fields of a body that pricing reads,
// found in one pass over it (each gjson.Get is a scan of its own, and
// pricing asked for fifteen). The first occurrence of a key counts, as
// with gjson.Get.
type topLevel struct {
	// counted are the message-like fields of allowance, in countedFields'
	// order; prompt is also counted[7].
	counted          [len(countedFields)]gjson.Result
	tools, functions gjson.Result
	// stored are the storedInput fields.
	stored [len(storedInput)]gjson.Result
}

var countedFields = [...]string{"messages", "contents", "input", "system", "systemInstruction",
	"system_instruction", "instructions", "prompt"}

const promptField = 7

func readTop(compact []byte) topLevel {
	var t topLevel
	set := func(r *gjson.Result, v gjson.Result) {
		if !r.Exists() {
			*r = v
		}
	}
	gjson.ParseBytes(compact).ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		for i, f := range countedFields {
			if key == f {
				set(&t.counted[i], v)
				return true
			}
		}
		for i, f := range storedInput {
			if key == f {
				set(&t.stored[i], v)
				return true
			}
		}
		switch key {
		case "tools":
			set(&t.tools, v)
		case "functions":
			set(&t.functions, v)
		}
		return true
	})
	return t
}

// allowance is the template allowance of a body: a base, a share per
// message (messages, contents, input items, a system prompt) and one for
// tool definitions.
func allowance(t *topLevel) int64 {
	n := int64(0)
	for _, r := range t.counted {
		switch {
		case r.IsArray():
			r.ForEach(func(_, _ gjson.Result) bool { n++; return true })
		case present(r):
			n++
		}
	}
	a := BaseAllowance + n*PerMessageAllowance
	if present(t.tools) || present(t.functions) {
		a += ToolsAllowance
	}
	return a
}

// prompts is the number of prompts of a legacy completions request: a list
// of strings (or of token lists) is one completion per prompt.
func prompts(r Request, t *topLevel) int64 {
	if r.Endpoint != "completions" {
		return 1
	}
	p := t.counted[promptField]
	if !p.IsArray() {
		return 1
	}
	items := p.Array()
	if len(items) == 0 || items[0].Type == gjson.Number {
		return 1 // one prompt given as token ids
	}
	return int64(len(items))
}
