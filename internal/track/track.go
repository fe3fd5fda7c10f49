// Package track measures answers as they pass: time to first token,
// content and reasoning token counts, tokens per second (server-side timing
// preferred), and the usage the provider reported. One Stream watches one
// streamed answer; Unary reads a whole answer's usage.
package track

import (
	"bytes"
	"strings"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"switchboard/internal/sse"
)

// Protocol is the wire protocol of the events a Stream sees.
type Protocol int

const (
	Chat Protocol = iota
	Completions
	Responses
	// Messages is Anthropic's Messages stream (native passthrough).
	Messages
	// Gemini is Gemini's streamGenerateContent (native passthrough): each
	// event a whole GenerateContentResponse, no terminal event (the relay
	// marks Clean when the stream closes without error).
	Gemini
)

// Usage is what a provider reported, in one shape for every protocol.
type Usage struct {
	Input, Output, CacheRead, CacheWrite, Reasoning int64
	// HasInput and HasOutput are true when the answer carried the input
	// (prompt) and output (completion) counters explicitly, zeros
	// included; Known when it carried either.
	HasInput, HasOutput bool
	Known               bool
}

// Complete reports whether u has the counters a settlement needs: input
// and output (input alone when the endpoint generates nothing).
func (u Usage) Complete(noOutput bool) bool { return u.HasInput && (u.HasOutput || noOutput) }

// Stream accumulates one streamed answer's measurements.
type Stream struct {
	proto Protocol
	start time.Time

	firstToken, lastToken     time.Time
	firstContent, lastContent time.Time
	firstThink, lastThink     time.Time
	Content, Thinking         int

	Usage Usage
	// Final is true when Usage arrived after the content ended (every
	// choice seen had finished, every content block was closed) or in the
	// protocol's terminal event, and no content came after it: only such
	// usage may settle the stream. An early usage frame is partial.
	Final bool
	// serverSeconds is the provider's own generation time; serverTPS its
	// own tokens/s. Either, when present, outranks arrival times.
	serverSeconds float64
	serverTPS     float64
	// Clean is true once the protocol's terminal event was seen.
	Clean bool
	// Model is the model the provider's events named (the first seen);
	// Finish the reasons its choices, message or response ended with (at
	// most maxFinish). Spans report them.
	Model  string
	Finish []string
	// choices are the chat choices seen: true while one generates (no
	// finish_reason yet). blocks counts the Messages content blocks open.
	choices map[int64]bool
	blocks  int
}

// maxFinish bounds the finish reasons kept (one per choice).
const maxFinish = 16

// finished notes a finish reason (v aliases the event: copied).
func (s *Stream) finished(v gjson.Result) {
	if v.Type == gjson.String && len(s.Finish) < maxFinish {
		s.Finish = append(s.Finish, strings.Clone(v.Str))
	}
}

// named notes the model the provider named, once.
func (s *Stream) named(v gjson.Result) {
	if s.Model == "" && v.Type == gjson.String {
		s.Model = strings.Clone(v.Str)
	}
}

// NewStream starts measuring; start is when the request was sent.
func NewStream(p Protocol, start time.Time) *Stream { return &Stream{proto: p, start: start} }

// See inspects one event that arrived at now.
func (s *Stream) See(ev *sse.Event, now time.Time) {
	for _, c := range ev.Comments {
		// vLLM reports timing in an `: energy {...}` comment.
		if rest, ok := bytes.CutPrefix(bytes.TrimSpace(c), []byte("energy")); ok {
			if d := gjson.GetBytes(bytes.TrimSpace(rest), "duration_seconds"); d.Exists() && d.Float() > 0 {
				s.serverSeconds = d.Float()
			}
		}
	}
	if len(ev.Data) == 0 {
		return
	}
	if ev.Done() {
		s.Clean = true
		return
	}
	switch s.proto {
	case Chat, Completions:
		s.seeChat(ev.Data, now)
	case Responses:
		s.seeResponses(ev, now)
	case Messages:
		s.seeMessages(ev, now)
	case Gemini:
		s.seeGemini(ev.Data, now)
	}
}

func (s *Stream) content(now time.Time) {
	s.Content++
	if s.firstContent.IsZero() {
		s.firstContent = now
	}
	s.lastContent = now
	s.token(now)
}

func (s *Stream) thinking(now time.Time) {
	s.Thinking++
	if s.firstThink.IsZero() {
		s.firstThink = now
	}
	s.lastThink = now
	s.token(now)
}

func (s *Stream) token(now time.Time) {
	if s.firstToken.IsZero() {
		s.firstToken = now
	}
	s.lastToken = now
}

func (s *Stream) seeChat(data []byte, now time.Time) {
	// Every chunk of a stream comes through here: read it in place (no copy
	// to a string; nothing read outlives this call), in one pass over its
	// keys and each choice's.
	js := unsafe.String(unsafe.SliceData(data), len(data))
	var usage gjson.Result
	choices := false
	gjson.Parse(js).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "choices":
			v.ForEach(func(_, c gjson.Result) bool {
				choices = true
				s.seeChoice(c, now)
				return true
			})
		case "model":
			s.named(v)
		case "usage":
			if v.IsObject() {
				usage = v
				if t := v.Get("tokens_per_second"); t.Float() > 0 {
					s.serverTPS = t.Float()
				}
				if t := v.Get("completion_time"); t.Float() > 0 {
					s.serverSeconds = t.Float()
				}
			}
		case "x_groq":
			// Groq puts its usage under x_groq in streams.
			if u := v.Get("usage"); u.Get("completion_time").Float() > 0 {
				s.serverSeconds = u.Get("completion_time").Float()
				if !usage.Exists() && !s.Usage.Known {
					usage = u
				}
			}
		case "perf_metrics":
			if t := v.Get("generation-duration"); t.Float() > 0 {
				s.serverSeconds = t.Float()
			}
		}
		return true
	})
	switch {
	case usage.Exists():
		s.Usage = openAIUsage(usage)
		s.Final = s.contentEnded()
	case choices && !s.contentEnded():
		s.Final = false // content again after the usage: it was not the last word
	}
}

// Ended reports whether the answer reached its end: the protocol's
// terminal event, or (chat, completions, Gemini) every choice or
// candidate seen finished, or (Messages) the message's stop reason
// arrived. A stream that closes before that was cut, however cleanly the
// connection closed.
func (s *Stream) Ended() bool {
	switch {
	case s.Clean:
		return true
	case s.proto == Messages:
		return len(s.Finish) > 0
	case s.proto == Responses:
		return false
	}
	return s.contentEnded()
}

// contentEnded reports whether every chat choice seen has finished (and
// at least one was seen).
func (s *Stream) contentEnded() bool {
	if len(s.choices) == 0 {
		return false
	}
	for _, open := range s.choices {
		if open {
			return false
		}
	}
	return true
}

// seeChoice counts one choice of a chunk: a token of content or of
// reasoning, by the delta's (or the completion's) non-empty fields.
func (s *Stream) seeChoice(c gjson.Result, now time.Time) {
	think, content := false, false
	var index int64
	finished := false
	c.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "index":
			index = v.Int()
		case "finish_reason":
			finished = v.Type != gjson.Null && v.Str != ""
			s.finished(v)
		case "text": // legacy completions
			content = content || (s.proto == Completions && v.String() != "")
		case "delta":
			if s.proto == Completions {
				break
			}
			v.ForEach(func(k, v gjson.Result) bool {
				switch k.Str {
				case "reasoning_content", "reasoning", "thinking":
					think = think || v.String() != ""
				case "content", "refusal":
					content = content || v.String() != ""
				case "tool_calls":
					content = true
				}
				return true
			})
		}
		return true
	})
	if think {
		s.thinking(now)
	}
	if content {
		s.content(now)
	}
	if s.choices == nil {
		s.choices = make(map[int64]bool, 1)
	}
	if len(s.choices) < maxChoices || s.choices[index] || !finished {
		s.choices[index] = !finished
	}
}

// maxChoices bounds the choices a stream remembers (n is at most 128): a
// stream naming more indexes keeps them all open, so its usage stays
// partial.
const maxChoices = 1024

// openAIUsage reads a usage object in one pass over its keys.
func openAIUsage(u gjson.Result) Usage {
	var out Usage
	u.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "prompt_tokens":
			out.Input, out.HasInput, out.Known = v.Int(), v.Type == gjson.Number, true
		case "completion_tokens":
			out.Output, out.HasOutput, out.Known = v.Int(), v.Type == gjson.Number, true
		case "prompt_tokens_details":
			out.CacheRead = v.Get("cached_tokens").Int()
			out.CacheWrite += v.Get("cache_write_tokens").Int()
		case "cache_creation_input_tokens":
			out.CacheWrite += v.Int()
		case "completion_tokens_details":
			out.Reasoning = v.Get("reasoning_tokens").Int()
		}
		return true
	})
	return out
}

func eventType(ev *sse.Event) string {
	if ev.Name != "" {
		return ev.Name
	}
	return gjson.GetBytes(ev.Data, "type").String()
}

func (s *Stream) seeResponses(ev *sse.Event, now time.Time) {
	switch eventType(ev) {
	case "response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta":
		s.content(now)
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		s.thinking(now)
	case "response.completed", "response.incomplete":
		s.Clean = true
		r := gjson.GetBytes(ev.Data, "response")
		s.Usage = responsesUsage(r.Get("usage"))
		s.named(r.Get("model"))
		s.finished(r.Get("status"))
		s.Final = true // the terminal event
	case "response.failed":
		s.Clean = true
	}
}

func responsesUsage(u gjson.Result) Usage {
	in, out := u.Get("input_tokens"), u.Get("output_tokens")
	return Usage{
		Input:     in.Int(),
		Output:    out.Int(),
		CacheRead: u.Get("input_tokens_details.cached_tokens").Int(),
		Reasoning: u.Get("output_tokens_details.reasoning_tokens").Int(),
		HasInput:  in.Type == gjson.Number,
		HasOutput: out.Type == gjson.Number,
		Known:     in.Exists() || out.Exists(),
	}
}

func (s *Stream) seeMessages(ev *sse.Event, now time.Time) {
	switch eventType(ev) {
	case "message_start":
		s.named(gjson.GetBytes(ev.Data, "message.model"))
		u := gjson.GetBytes(ev.Data, "message.usage")
		s.messagesInput(u)
	case "content_block_start":
		s.blocks++
		s.Final = false
	case "content_block_stop":
		s.blocks = max(s.blocks-1, 0)
	case "content_block_delta":
		s.Final = false
		switch gjson.GetBytes(ev.Data, "delta.type").String() {
		case "thinking_delta":
			s.thinking(now)
		case "text_delta", "input_json_delta":
			s.content(now)
		}
	case "message_delta":
		s.finished(gjson.GetBytes(ev.Data, "delta.stop_reason"))
		u := gjson.GetBytes(ev.Data, "usage")
		if o := u.Get("output_tokens"); o.Exists() {
			s.Usage.Output = o.Int()
			s.Usage.HasOutput = o.Type == gjson.Number
			s.Usage.Known = true
			// Counts are cumulative; newer API versions repeat the input
			// here.
			if u.Get("input_tokens").Exists() {
				s.messagesInput(u)
			}
			// message_delta closes the message: final when no block is
			// still open.
			s.Final = s.blocks == 0
		}
	case "message_stop":
		s.Clean = true
	}
}

// messagesInput reads a Messages usage object's input side: input_tokens
// counts uncached input only; cache reads and writes are added.
func (s *Stream) messagesInput(u gjson.Result) {
	in := u.Get("input_tokens")
	cr, cw := u.Get("cache_read_input_tokens").Int(), u.Get("cache_creation_input_tokens").Int()
	s.Usage.Input = in.Int() + cr + cw
	s.Usage.CacheRead, s.Usage.CacheWrite = cr, cw
	s.Usage.HasInput = in.Type == gjson.Number
	s.Usage.Known = s.Usage.Known || in.Exists()
}

// Result is a finished stream's measurement.
type Result struct {
	TTFT        time.Duration // 0 when no token arrived
	Content     int
	Thinking    int
	ContentTPS  float64
	ThinkingTPS float64
	TotalTPS    float64
	// Tokens is the completion token count: the provider's usage when
	// reported, else the counted deltas.
	Tokens int
	// ServerTiming is true when TotalTPS came from the provider's own timing.
	ServerTiming bool
}

// Result computes the measurement so far.
func (s *Stream) Result() Result {
	r := Result{Content: s.Content, Thinking: s.Thinking, Tokens: s.Content + s.Thinking}
	if s.Usage.Known && s.Usage.Output > 0 {
		r.Tokens = int(s.Usage.Output)
	}
	if !s.firstToken.IsZero() {
		r.TTFT = s.firstToken.Sub(s.start)
	}
	r.ContentTPS = rate(s.Content, s.firstContent, s.lastContent)
	r.ThinkingTPS = rate(s.Thinking, s.firstThink, s.lastThink)
	switch {
	case s.serverTPS > 0:
		r.TotalTPS, r.ServerTiming = s.serverTPS, true
	case s.serverSeconds > 0 && r.Tokens > 0:
		r.TotalTPS, r.ServerTiming = float64(r.Tokens)/s.serverSeconds, true
	default:
		r.TotalTPS = rate(r.Tokens, s.firstToken, s.lastToken)
	}
	return r
}

// rate is tokens over the window from the first to the last token; a
// single token (or none) has no rate.
func rate(n int, first, last time.Time) float64 {
	d := last.Sub(first).Seconds()
	if n < 2 || d <= 0 {
		return 0
	}
	return float64(n-1) / d
}

// Unary reads a whole answer's usage, for any protocol.
func Unary(p Protocol, body []byte) Usage {
	// Read in place: only numbers leave this function.
	usage := gjson.Get(unsafe.String(unsafe.SliceData(body), len(body)), "usage")
	switch p {
	case Responses:
		return responsesUsage(usage)
	case Gemini:
		return geminiUsage(gjson.Get(unsafe.String(unsafe.SliceData(body), len(body)), "usageMetadata"))
	case Messages:
		u := usage
		in, out := u.Get("input_tokens"), u.Get("output_tokens")
		return Usage{
			Input:      in.Int() + u.Get("cache_read_input_tokens").Int() + u.Get("cache_creation_input_tokens").Int(),
			Output:     out.Int(),
			CacheRead:  u.Get("cache_read_input_tokens").Int(),
			CacheWrite: u.Get("cache_creation_input_tokens").Int(),
			HasInput:   in.Type == gjson.Number,
			HasOutput:  out.Type == gjson.Number,
			Known:      in.Exists() || out.Exists(),
		}
	}
	return openAIUsage(usage)
}
