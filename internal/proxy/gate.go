package proxy

import (
	"unsafe"

	"github.com/tidwall/gjson"

	"switchboard/internal/jsoncheck"
	"switchboard/internal/provider"
	"switchboard/internal/sse"
)

// Verdict is what one stream event means before the client has seen bytes.
type Verdict int

const (
	// Hold: metadata (role-only chunk, created events); keep waiting.
	Hold Verdict = iota
	// Commit: the first content, reasoning, tool call or a clean finish has
	// arrived; the stream belongs to this provider from now on.
	Commit
	// Fail: the upstream reported an error inside the stream.
	Fail
	// Empty: the stream finished cleanly without any content, reasoning,
	// tool call or refusal: no answer, so another provider is tried.
	Empty
)

// Gate classifies a stream event for the first-token gate.
type Gate func(ev *sse.Event) Verdict

// GateFor returns the gate of an endpoint's stream protocol.
func GateFor(ep provider.Endpoint) Gate {
	switch ep {
	case provider.Chat:
		return chatGate
	case provider.Completions:
		return completionsGate
	case provider.Responses:
		return responsesGate
	case provider.Messages:
		return messagesGate
	case provider.GenerateContent:
		return geminiGate
	}
	return func(*sse.Event) Verdict { return Commit }
}

func chatGate(ev *sse.Event) Verdict {
	return choicesGate(ev, func(c gjson.Result) bool {
		commit := false
		c.Get("delta").ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "content", "reasoning_content", "reasoning", "thinking", "refusal":
				commit = v.String() != ""
			case "tool_calls", "function_call":
				commit = true
			}
			return !commit
		})
		return commit
	})
}

func completionsGate(ev *sse.Event) Verdict {
	return choicesGate(ev, func(c gjson.Result) bool { return c.Get("text").String() != "" })
}

// choicesGate is the gate of the chat and completions streams: an error
// fails, a choice with a token (per token) or a finish reason commits.
// The event is read in place: nothing read outlives the call.
func choicesGate(ev *sse.Event, token func(choice gjson.Result) bool) Verdict {
	if len(ev.Data) == 0 {
		return Hold
	}
	if ev.Done() {
		return Fail // [DONE] before any content: nothing was answered
	}
	if !jsoncheck.Valid(ev.Data) {
		return Fail // a broken line before the first token: try elsewhere
	}
	r := gjson.Parse(unsafe.String(unsafe.SliceData(ev.Data), len(ev.Data)))
	if r.Get("error").Exists() {
		return Fail
	}
	v := Hold
	r.Get("choices").ForEach(func(_, c gjson.Result) bool {
		f := c.Get("finish_reason")
		switch {
		case token(c):
			v = Commit
		case !f.Exists() || f.Type == gjson.Null:
		case f.Str == "stop":
			// Finished, and nothing came before (a token commits): an
			// empty answer, unless another choice has one.
			v = Empty
			return true
		default:
			// length (the client's limit, after hidden reasoning),
			// tool_calls, content_filter: an answer in its own right.
			v = Commit
		}
		return v != Commit
	})
	return v
}

func responsesGate(ev *sse.Event) Verdict {
	if ev.Done() {
		return Fail
	}
	typ := ev.Name
	if typ == "" {
		typ = gjson.GetBytes(ev.Data, "type").String()
	}
	switch typ {
	case "error", "response.failed", "response.not_found":
		// response.not_found is LLM Proxy's stand-in for response.failed
		// (a chained gateway forwards it): no answer here, try elsewhere.
		return Fail
	case "response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta",
		"response.reasoning_summary_text.delta", "response.function_call_arguments.delta",
		"response.incomplete":
		return Commit
	case "response.completed":
		if responseHasOutput(gjson.GetBytes(ev.Data, "response.output")) {
			return Commit
		}
		return Empty
	case "response.output_item.added":
		if t := gjson.GetBytes(ev.Data, "item.type").String(); t != "message" && t != "reasoning" {
			return Commit // tool calls and hosted tools are output too
		}
	}
	return Hold
}

func messagesGate(ev *sse.Event) Verdict {
	typ := ev.Name
	if typ == "" {
		typ = gjson.GetBytes(ev.Data, "type").String()
	}
	switch typ {
	case "error":
		return Fail
	case "content_block_delta":
		return Commit
	case "message_delta":
		switch gjson.GetBytes(ev.Data, "delta.stop_reason").String() {
		case "end_turn", "stop_sequence":
			return Empty // finished before any content block delta
		}
		return Commit // max_tokens, tool_use, refusal, pause_turn: an answer
	case "message_stop":
		return Empty
	case "content_block_start":
		if gjson.GetBytes(ev.Data, "content_block.type").String() == "tool_use" {
			return Commit
		}
	}
	return Hold
}

// geminiGate: Gemini's events are whole GenerateContentResponses. An
// error object fails; a part with data (text, thought, call, inline data)
// or a finish other than STOP commits (a blocked prompt or candidate is
// an answer in its own right); STOP with nothing before it is empty.
func geminiGate(ev *sse.Event) Verdict {
	if len(ev.Data) == 0 {
		return Hold
	}
	if !jsoncheck.Valid(ev.Data) {
		return Fail
	}
	r := gjson.Parse(unsafe.String(unsafe.SliceData(ev.Data), len(ev.Data)))
	if r.Get("error").Exists() {
		return Fail
	}
	if r.Get("promptFeedback.blockReason").String() != "" {
		return Commit
	}
	v := Hold
	r.Get("candidates").ForEach(func(_, c gjson.Result) bool {
		c.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
			if p.Get("text").String() != "" || p.Get("functionCall").Exists() || p.Get("inlineData").Exists() ||
				p.Get("executableCode").Exists() {
				v = Commit
			}
			return v != Commit
		})
		switch f := c.Get("finishReason").String(); {
		case v == Commit, f == "":
		case f == "STOP":
			v = Empty
		default:
			v = Commit
		}
		return v != Commit
	})
	return v
}

// responseHasOutput reports whether a completed Responses API answer holds
// anything: a non-message item (tool call, reasoning) or message text.
func responseHasOutput(items gjson.Result) bool {
	found := false
	items.ForEach(func(_, it gjson.Result) bool {
		if it.Get("type").String() != "message" {
			found = true
			return false
		}
		it.Get("content").ForEach(func(_, part gjson.Result) bool {
			found = part.Get("text").String() != "" || part.Get("refusal").String() != ""
			return !found
		})
		return !found
	})
	return found
}
