// Package peek reads the few facts the gateway needs from a body or a
// stream in a client's own protocol (OpenAI chat, OpenAI Responses,
// Anthropic Messages, Gemini) without decoding or re-encoding it, so that
// native pass-through can admit, meter, gate and settle an answer it
// relays byte for byte: the model, the stream flag and output limit of a
// request; the usage, finish reason and content of an answer; and, for a
// stream, the first content token (for the time-to-first-token gate) and
// whether the usage that arrived counts (issue 24: a stream's usage counts
// only when it arrives after the content ended, or in the terminal
// event).
//
// Everything is read in place with gjson: nothing read outlives a call
// except numbers and short strings.
package peek

import (
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"switchboard/internal/limit"
)

// Protocol is a client-facing wire protocol.
type Protocol int

const (
	// Chat is OpenAI chat completions.
	Chat Protocol = iota
	// Responses is the OpenAI Responses API.
	Responses
	// Messages is Anthropic's Messages API.
	Messages
	// Gemini is Gemini's generateContent.
	Gemini
)

func (p Protocol) String() string {
	switch p {
	case Chat:
		return "chat"
	case Responses:
		return "responses"
	case Messages:
		return "messages"
	case Gemini:
		return "gemini"
	}
	return "unknown"
}

// view reads b as a string without copying it; the result must not
// outlive b's next change (gjson results only point into it).
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// Request is what admission needs from a client's request body.
type Request struct {
	// Model is the body's model; "" for Gemini, whose URL names it.
	Model string
	// Stream is the body's stream flag; false for Gemini, whose method
	// (streamGenerateContent) says it.
	Stream bool
	// Limits are the output limit, candidate count and reasoning budget
	// the body states, as the token estimate reads them
	// (max_tokens, max_completion_tokens, max_output_tokens,
	// generationConfig.maxOutputTokens, ...).
	Limits limit.Limits
}

// ReadRequest reads a request body of protocol p.
func ReadRequest(p Protocol, body []byte) Request {
	r := Request{Limits: limit.ReadLimits(body)}
	if p == Gemini {
		return r
	}
	res := gjson.GetMany(view(body), "model", "stream")
	if res[0].Type == gjson.String {
		r.Model = strings.Clone(res[0].Str) // it outlives body
	}
	r.Stream = res[1].Type == gjson.True
	return r
}

// PromptTokens is the gateway's estimate of a request's prompt tokens
// (the characters of its compact body over 4, as the TPM estimate
// counts them), for /v1/messages/count_tokens and Gemini's :countTokens
// when no upstream counts them.
func PromptTokens(body []byte) int64 {
	return limit.EstimateTokens(body, limit.Target{NoOutput: true}).Input
}

// Usage is an answer's token counts in one shape for every protocol.
// Input counts every prompt token, cached or not; CacheRead and
// CacheWrite are parts of it. Output counts every generated token,
// Reasoning included.
type Usage struct {
	Input, Output, CacheRead, CacheWrite, Reasoning int64
	// HasInput and HasOutput are true when the answer stated the counter
	// (an explicit 0 counts). Gemini leaves zero counts out, so a Gemini
	// usageMetadata states both when it holds promptTokenCount and
	// totalTokenCount.
	HasInput, HasOutput bool
}

// Complete reports whether both required counters were stated.
func (u Usage) Complete() bool { return u.HasInput && u.HasOutput }

// Answer is what metering needs from a unary answer.
type Answer struct {
	Usage Usage
	// Finish is the protocol's own reason the answer ended
	// (finish_reason, stop_reason, finishReason; for Responses the status,
	// or incomplete_details.reason when incomplete); "" when absent.
	Finish string
	// Content is true when the answer holds any text, reasoning or call.
	Content bool
	// Model is the model the answer names ("modelVersion" for Gemini).
	Model string
}

// ReadAnswer reads a unary answer of protocol p.
func ReadAnswer(p Protocol, body []byte) Answer {
	root := gjson.Parse(view(body))
	var a Answer
	switch p {
	case Chat:
		a.Usage = chatUsage(root.Get("usage"))
		c := root.Get("choices.0")
		a.Finish = c.Get("finish_reason").String()
		root.Get("choices").ForEach(func(_, c gjson.Result) bool {
			m := c.Get("message")
			a.Content = nonEmpty(m, "content", "reasoning_content", "reasoning", "refusal") || m.Get("tool_calls.0").Exists()
			return !a.Content
		})
	case Responses:
		a.Usage = responsesUsage(root.Get("usage"))
		a.Finish = root.Get("status").String()
		if a.Finish == "incomplete" {
			if r := root.Get("incomplete_details.reason").String(); r != "" {
				a.Finish = r
			}
		}
		root.Get("output").ForEach(func(_, it gjson.Result) bool {
			if it.Get("type").String() != "message" {
				a.Content = true // a call or reasoning
			}
			it.Get("content").ForEach(func(_, part gjson.Result) bool {
				a.Content = a.Content || nonEmpty(part, "text", "refusal")
				return !a.Content
			})
			return !a.Content
		})
	case Messages:
		a.Usage = messagesUsage(root.Get("usage"))
		a.Finish = root.Get("stop_reason").String()
		root.Get("content").ForEach(func(_, b gjson.Result) bool {
			a.Content = b.Get("type").String() != "text" || b.Get("text").String() != ""
			return !a.Content
		})
	case Gemini:
		a.Usage = geminiUsage(root.Get("usageMetadata"))
		a.Finish = root.Get("candidates.0.finishReason").String()
		root.Get("candidates").ForEach(func(_, c gjson.Result) bool {
			a.Content = geminiContent(c)
			return !a.Content
		})
		a.Model = root.Get("modelVersion").String()
		return a.copyModel()
	}
	a.Model = root.Get("model").String()
	return a.copyModel()
}

// copyModel copies the strings out of the body they point into.
func (a Answer) copyModel() Answer {
	a.Model, a.Finish = strings.Clone(a.Model), strings.Clone(a.Finish)
	return a
}

// nonEmpty reports whether any of keys holds a non-empty string.
func nonEmpty(r gjson.Result, keys ...string) bool {
	for _, k := range keys {
		if r.Get(k).String() != "" {
			return true
		}
	}
	return false
}

// geminiContent reports whether a candidate carries any part with data.
func geminiContent(c gjson.Result) bool {
	found := false
	c.Get("content.parts").ForEach(func(_, p gjson.Result) bool {
		p.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "text":
				found = v.String() != ""
			case "functionCall", "executableCode", "codeExecutionResult", "inlineData", "fileData":
				found = true
			}
			return !found
		})
		return !found
	})
	return found
}

func has(r gjson.Result) bool { return r.Exists() && r.Type != gjson.Null }

func chatUsage(u gjson.Result) Usage {
	var out Usage
	u.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "prompt_tokens":
			out.Input, out.HasInput = v.Int(), has(v)
		case "completion_tokens":
			out.Output, out.HasOutput = v.Int(), has(v)
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

func responsesUsage(u gjson.Result) Usage {
	in, out := u.Get("input_tokens"), u.Get("output_tokens")
	return Usage{
		Input: in.Int(), HasInput: has(in), Output: out.Int(), HasOutput: has(out),
		CacheRead:  u.Get("input_tokens_details.cached_tokens").Int(),
		CacheWrite: u.Get("input_tokens_details.cache_write_tokens").Int(),
		Reasoning:  u.Get("output_tokens_details.reasoning_tokens").Int(),
	}
}

// messagesUsage reads Anthropic's usage, whose input_tokens leave out the
// cache reads and writes.
func messagesUsage(u gjson.Result) Usage {
	in, out := u.Get("input_tokens"), u.Get("output_tokens")
	read, write := u.Get("cache_read_input_tokens").Int(), u.Get("cache_creation_input_tokens").Int()
	return Usage{
		Input: in.Int() + read + write, HasInput: has(in), Output: out.Int(), HasOutput: has(out),
		CacheRead: read, CacheWrite: write,
		Reasoning: u.Get("output_tokens_details.thinking_tokens").Int(),
	}
}

// geminiUsage reads usageMetadata. Gemini leaves zero counts out:
// candidatesTokenCount is absent when nothing was generated, so
// totalTokenCount vouches for the output.
func geminiUsage(u gjson.Result) Usage {
	if !u.IsObject() {
		return Usage{}
	}
	prompt, cand, thoughts, total := u.Get("promptTokenCount"), u.Get("candidatesTokenCount"), u.Get("thoughtsTokenCount"), u.Get("totalTokenCount")
	return Usage{
		Input: prompt.Int() + u.Get("toolUsePromptTokenCount").Int(), HasInput: has(prompt),
		Output: cand.Int() + thoughts.Int(), HasOutput: has(cand) || has(thoughts) || has(total) && has(prompt),
		CacheRead: u.Get("cachedContentTokenCount").Int(),
		Reasoning: thoughts.Int(),
	}
}
