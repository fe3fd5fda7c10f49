package peek

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"
)

// Seen is what one stream event meant.
type Seen struct {
	// Token: the event carries content, reasoning or a tool call.
	Token bool
	// First: Token, and the first such event of the stream (the event
	// that passes the time-to-first-token gate).
	First bool
	// Error: the upstream reported an error inside the stream.
	Error bool
	// End: the protocol's terminal event (chat's [DONE], Responses'
	// response.completed, .incomplete or .failed, Messages'
	// message_stop). Gemini has none: its stream ends when it closes, and
	// ContentEnded says whether every candidate finished first.
	End bool
}

// Stream follows one streamed answer, event by event. It is not safe for
// concurrent use.
type Stream struct {
	proto    Protocol
	tokens   bool
	ended    bool // the content ended: every choice or candidate finished
	terminal bool
	finish   string
	final    bool  // usage counts
	usage    Usage // the usage that counts, once final
	latest   Usage // the last usage seen, wherever it came
	start    Usage // Messages: message_start's counts
	open     map[int]bool
	done     map[int]bool
}

// NewStream follows a stream of protocol p.
func NewStream(p Protocol) *Stream { return &Stream{proto: p} }

// Usage is the usage that counts and whether there is one: reported
// after the content ended (chat's usage chunk after the finish, Gemini's
// usageMetadata beside or after the last finishReason, Messages'
// message_delta) or in the terminal event (Responses). A usage frame sent
// before the content ended is only Latest.
func (s *Stream) Usage() (Usage, bool) { return s.usage, s.final }

// Latest is the last usage the stream reported, wherever it came: what
// is known to have been spent so far (Messages: message_start's input
// counts until message_delta).
func (s *Stream) Latest() Usage { return s.latest }

// Finish is the protocol's own reason the answer ended ("" until one
// arrived); for Responses the final status, or the incomplete reason.
func (s *Stream) Finish() string { return s.finish }

// ContentEnded reports whether the content ended: every choice (chat) or
// candidate (Gemini) finished, Messages' message_delta or a Responses
// terminal event arrived.
func (s *Stream) ContentEnded() bool { return s.ended }

// Ended reports whether the terminal event arrived (never for Gemini).
func (s *Stream) Ended() bool { return s.terminal }

// See reads one event: name is the SSE event name ("" when absent), data
// its data. For Gemini's JSON-array form, pass each array element as
// data.
func (s *Stream) See(name string, data []byte) Seen {
	var seen Seen
	switch s.proto {
	case Chat:
		seen = s.seeChat(data)
	case Responses:
		seen = s.seeResponses(name, data)
	case Messages:
		seen = s.seeMessages(name, data)
	case Gemini:
		seen = s.seeGemini(data)
	}
	if seen.Token && !s.tokens {
		s.tokens, seen.First = true, true
	}
	return seen
}

// finished records that choice i (or candidate i) finished; the content
// ends when every one that appeared did.
func (s *Stream) finished(i int, reason string) {
	if s.done == nil {
		s.done = map[int]bool{}
	}
	s.done[i] = true
	if s.finish == "" || i == 0 {
		s.finish = strings.Clone(reason)
	}
}

func (s *Stream) appeared(i int) {
	if s.open == nil {
		s.open = map[int]bool{}
	}
	s.open[i] = true
}

func (s *Stream) allFinished() bool {
	if len(s.done) == 0 {
		return false
	}
	for i := range s.open {
		if !s.done[i] {
			return false
		}
	}
	return true
}

// report records a usage frame; it counts when the content has ended.
func (s *Stream) report(u Usage) {
	s.latest = u
	if s.ended {
		s.usage, s.final = u, true
	}
}

func (s *Stream) seeChat(data []byte) Seen {
	var seen Seen
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		s.terminal, seen.End = true, true
		return seen
	}
	root := gjson.Parse(view(data))
	if has(root.Get("error")) {
		seen.Error = true
		return seen
	}
	var usage gjson.Result
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "choices":
			v.ForEach(func(_, c gjson.Result) bool {
				i := int(c.Get("index").Int())
				s.appeared(i)
				d := c.Get("delta")
				if nonEmpty(d, "content", "reasoning_content", "reasoning", "thinking", "refusal") ||
					d.Get("tool_calls").Exists() || d.Get("function_call").Exists() {
					seen.Token = true
				}
				if f := c.Get("finish_reason"); f.Type == gjson.String && f.Str != "" {
					s.finished(i, f.Str)
				}
				return true
			})
		case "usage":
			if v.IsObject() {
				usage = v
			}
		case "x_groq":
			// Groq puts its usage under x_groq in streams.
			if u := v.Get("usage"); u.IsObject() && !usage.Exists() {
				usage = u
			}
		}
		return true
	})
	s.ended = s.ended || s.allFinished()
	if usage.Exists() {
		s.report(chatUsage(usage))
	}
	return seen
}

func eventType(name string, data []byte) string {
	if name != "" {
		return name
	}
	return gjson.Get(view(data), "type").String()
}

func (s *Stream) seeResponses(name string, data []byte) Seen {
	var seen Seen
	switch typ := eventType(name, data); typ {
	case "error":
		seen.Error = true
	case "response.completed", "response.incomplete", "response.failed":
		resp := gjson.Get(view(data), "response")
		s.ended, s.terminal, seen.End = true, true, true
		seen.Error = typ == "response.failed"
		s.finish = strings.Clone(resp.Get("status").String())
		if r := resp.Get("incomplete_details.reason").String(); s.finish == "incomplete" && r != "" {
			s.finish = strings.Clone(r)
		}
		if u := resp.Get("usage"); u.IsObject() {
			s.report(responsesUsage(u))
		}
	case "response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta",
		"response.reasoning_summary_text.delta", "response.function_call_arguments.delta",
		"response.custom_tool_call_input.delta":
		seen.Token = true
	case "response.output_item.added":
		if t := gjson.Get(view(data), "item.type").String(); t != "message" && t != "reasoning" {
			seen.Token = true // calls and hosted tools are output too
		}
	}
	return seen
}

func (s *Stream) seeMessages(name string, data []byte) Seen {
	var seen Seen
	switch eventType(name, data) {
	case "error":
		seen.Error = true
	case "message_start":
		s.start = messagesUsage(gjson.Get(view(data), "message.usage"))
		s.latest = s.start
	case "content_block_start":
		switch gjson.Get(view(data), "content_block.type").String() {
		case "tool_use", "server_tool_use":
			seen.Token = true
		}
	case "content_block_delta":
		seen.Token = gjson.Get(view(data), "delta.type").String() != "signature_delta"
	case "message_delta":
		root := gjson.Parse(view(data))
		s.ended = true
		s.finish = strings.Clone(root.Get("delta.stop_reason").String())
		// Counts are cumulative; the input counts appear here only on
		// some API versions, else message_start's stand.
		u := s.start
		in, read, write := u.Input-u.CacheRead-u.CacheWrite, u.CacheRead, u.CacheWrite
		d := root.Get("usage")
		if v := d.Get("output_tokens"); has(v) {
			u.Output, u.HasOutput = v.Int(), true
		}
		if v := d.Get("input_tokens"); has(v) {
			in, u.HasInput = v.Int(), true
		}
		if v := d.Get("cache_read_input_tokens"); has(v) {
			read = v.Int()
		}
		if v := d.Get("cache_creation_input_tokens"); has(v) {
			write = v.Int()
		}
		if v := d.Get("output_tokens_details.thinking_tokens"); has(v) {
			u.Reasoning = v.Int()
		}
		u.Input, u.CacheRead, u.CacheWrite = in+read+write, read, write
		s.report(u)
	case "message_stop":
		s.ended, s.terminal, seen.End = true, true, true
	}
	return seen
}

func (s *Stream) seeGemini(data []byte) Seen {
	var seen Seen
	root := gjson.Parse(view(data))
	if has(root.Get("error")) {
		seen.Error = true
		return seen
	}
	cands := root.Get("candidates")
	if !cands.Exists() && root.Get("promptFeedback.blockReason").String() != "" {
		seen.Error = true // the prompt was blocked: no answer
		return seen
	}
	cands.ForEach(func(_, c gjson.Result) bool {
		i := int(c.Get("index").Int())
		s.appeared(i)
		seen.Token = seen.Token || geminiContent(c)
		if f := c.Get("finishReason").String(); f != "" {
			s.finished(i, f)
		}
		return true
	})
	s.ended = s.ended || s.allFinished()
	if u := root.Get("usageMetadata"); u.IsObject() {
		s.report(geminiUsage(u))
	}
	return seen
}
