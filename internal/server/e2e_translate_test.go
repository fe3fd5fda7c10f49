//go:build sdk

package server

// End-to-end protocol translation with tool use. The official OpenAI and
// Anthropic Go SDKs, unmodified, hold a two-turn tool conversation with the
// gateway over HTTP (turn 1: the model calls a tool, its JSON arguments
// streamed in pieces; turn 2: the client sends the tool result and gets the
// final answer), against fake upstreams that speak each native protocol.
// Every fake reads what it receives strictly in its own wire shape (tool
// definitions, the tool call and its id, the tool result) and refuses
// anything else with a 400 naming the problem, which the SDK then reports.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
)

// The conversation, the same whatever the client and the upstream.
const (
	e2eSystem   = "Answer briefly."
	e2eQuestion = "What is the weather in Paris?"
	e2eLead     = "Let me check."
	e2eTool     = "get_weather"
	e2eToolDesc = "Current weather for a city"
	e2eSchema   = `{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`
	e2eArgs     = `{"city":"Paris","unit":"celsius"}`
	e2eResult   = `{"temp_c":21,"sky":"sunny"}`
	e2eFinal    = "Paris: 21 °C & sunny <today>."
	e2eSig      = "CiQB+/+/PhBV/g==" // the Gemini thought signature on the call (base64)

	e2eOpenAICallID    = "call_w1"
	e2eAnthropicCallID = "toolu_01W"
)

// The arguments and the final text as the upstreams stream them.
var (
	e2eArgPieces   = []string{`{"city":`, `"Paris",`, `"unit":"celsius"}`}
	e2eFinalPieces = []string{"Paris: 21 °C", " & sunny <today>."}
)

// e2eUsage is what every upstream reports for turn 1 and turn 2, each in
// its own shape.
var e2eUsage = [3]struct{ in, out int64 }{{}, {50, 12}, {80, 9}}

// e2eSeen is an upstream request reduced to the conversation, read from
// the protocol's native shape.
type e2eSeen struct {
	stream     bool
	model      string
	system     string
	tools      []e2eToolSeen
	user       string
	assistant  string // turn 2: the assistant turn's text
	callID     string // turn 2: the tool call in the assistant turn
	callName   string
	callArgs   string
	signature  string // gemini: the functionCall part's thoughtSignature
	resultID   string // turn 2: the call the tool result answers (openai, anthropic)
	resultName string // gemini: functionResponse.name
	result     string // the tool result: text, or the functionResponse object (gemini)
}

type e2eToolSeen struct{ name, desc, schema string }

var anthropicToolID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

func (s *e2eSeen) turn() int {
	if s.callName != "" || s.result != "" {
		return 2
	}
	return 1
}

// e2eText reads a content value: a string, or an array of text blocks
// (OpenAI text parts and Anthropic text blocks share the shape).
func e2eText(v gjson.Result, field string) (string, error) {
	if v.Type == gjson.String {
		return v.String(), nil
	}
	if !v.IsArray() {
		return "", fmt.Errorf("%s: want a string or text blocks, got %s", field, v.Raw)
	}
	var sb strings.Builder
	for i, b := range v.Array() {
		if b.Get("type").String() != "text" {
			return "", fmt.Errorf("%s[%d]: want a text block, got %s", field, i, b.Raw)
		}
		sb.WriteString(b.Get("text").String())
	}
	return sb.String(), nil
}

func e2eRoles(list []gjson.Result, key string) string {
	roles := make([]string, len(list))
	for i, m := range list {
		roles[i] = m.Get(key).String()
	}
	return strings.Join(roles, ",")
}

// e2eReadOpenAI reads a chat completions request.
func e2eReadOpenAI(body []byte) (*e2eSeen, error) {
	b := gjson.ParseBytes(body)
	s := &e2eSeen{stream: b.Get("stream").Bool(), model: b.Get("model").String()}
	if s.stream && !b.Get("stream_options.include_usage").Bool() {
		return nil, errors.New("a stream request without stream_options.include_usage")
	}
	for i, t := range b.Get("tools").Array() {
		if t.Get("type").String() != "function" || !t.Get("function.parameters").IsObject() {
			return nil, fmt.Errorf("tools[%d] is not a function tool with parameters: %s", i, t.Raw)
		}
		s.tools = append(s.tools, e2eToolSeen{t.Get("function.name").String(), t.Get("function.description").String(), t.Get("function.parameters").Raw})
	}
	msgs := b.Get("messages").Array()
	if r := e2eRoles(msgs, "role"); r != "system,user" && r != "system,user,assistant,tool" {
		return nil, fmt.Errorf("message roles %q", r)
	}
	var err error
	for i, m := range msgs {
		field := fmt.Sprintf("messages[%d].content", i)
		switch m.Get("role").String() {
		case "system":
			s.system, err = e2eText(m.Get("content"), field)
		case "user":
			s.user, err = e2eText(m.Get("content"), field)
		case "assistant":
			s.assistant, err = e2eText(m.Get("content"), field)
			calls := m.Get("tool_calls").Array()
			if len(calls) != 1 || calls[0].Get("type").String() != "function" || calls[0].Get("function.arguments").Type != gjson.String {
				return nil, fmt.Errorf("messages[%d].tool_calls: want one function call with string arguments, got %s", i, m.Get("tool_calls").Raw)
			}
			s.callID, s.callName, s.callArgs = calls[0].Get("id").String(), calls[0].Get("function.name").String(), calls[0].Get("function.arguments").String()
		case "tool":
			s.resultID = m.Get("tool_call_id").String()
			s.result, err = e2eText(m.Get("content"), field)
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// e2eReadAnthropic reads a Messages request: tool_use blocks in the
// assistant turn, tool_result blocks in the user turn after it.
func e2eReadAnthropic(body []byte) (*e2eSeen, error) {
	b := gjson.ParseBytes(body)
	s := &e2eSeen{stream: b.Get("stream").Bool(), model: b.Get("model").String()}
	if b.Get("max_tokens").Int() < 1 {
		return nil, errors.New("max_tokens missing")
	}
	var err error
	if s.system, err = e2eText(b.Get("system"), "system"); err != nil {
		return nil, err
	}
	for i, t := range b.Get("tools").Array() {
		if typ := t.Get("type").String(); (typ != "" && typ != "custom") || !t.Get("input_schema").IsObject() || t.Get("function").Exists() {
			return nil, fmt.Errorf("tools[%d] is not a custom tool with input_schema: %s", i, t.Raw)
		}
		s.tools = append(s.tools, e2eToolSeen{t.Get("name").String(), t.Get("description").String(), t.Get("input_schema").Raw})
	}
	msgs := b.Get("messages").Array()
	if r := e2eRoles(msgs, "role"); r != "user" && r != "user,assistant,user" {
		return nil, fmt.Errorf("message roles %q", r)
	}
	if s.user, err = e2eText(msgs[0].Get("content"), "messages[0].content"); err != nil {
		return nil, err
	}
	if len(msgs) == 1 {
		return s, nil
	}
	for j, bl := range msgs[1].Get("content").Array() {
		switch bl.Get("type").String() {
		case "text":
			s.assistant += bl.Get("text").String()
		case "tool_use":
			if s.callName != "" || !bl.Get("input").IsObject() {
				return nil, fmt.Errorf("messages[1].content[%d]: want one tool_use with an input object, got %s", j, bl.Raw)
			}
			s.callID, s.callName, s.callArgs = bl.Get("id").String(), bl.Get("name").String(), bl.Get("input").Raw
		default:
			return nil, fmt.Errorf("messages[1].content[%d]: unexpected block %s", j, bl.Raw)
		}
	}
	results := msgs[2].Get("content").Array()
	if len(results) != 1 || results[0].Get("type").String() != "tool_result" || results[0].Get("is_error").Bool() {
		return nil, fmt.Errorf("messages[2].content: want one tool_result block, got %s", msgs[2].Get("content").Raw)
	}
	s.resultID = results[0].Get("tool_use_id").String()
	// The Messages API refuses ids outside this pattern with a 400.
	for _, id := range []string{s.callID, s.resultID} {
		if !anthropicToolID.MatchString(id) {
			return nil, fmt.Errorf("tool_use id %q: String should match pattern '^[a-zA-Z0-9_-]+$'", id)
		}
	}
	s.result, err = e2eText(results[0].Get("content"), "messages[2].content[0].content")
	return s, err
}

// e2eReadGemini reads a generateContent request: functionCall parts in the
// model turn, functionResponse parts in the user turn after it.
func e2eReadGemini(body []byte) (*e2eSeen, error) {
	b := gjson.ParseBytes(body)
	s := &e2eSeen{}
	for _, p := range b.Get("systemInstruction.parts").Array() {
		s.system += p.Get("text").String()
	}
	tools := b.Get("tools").Array()
	if len(tools) != 1 {
		return nil, fmt.Errorf("tools: want one tool with functionDeclarations, got %s", b.Get("tools").Raw)
	}
	for i, d := range tools[0].Get("functionDeclarations").Array() {
		if !d.Get("parametersJsonSchema").IsObject() {
			return nil, fmt.Errorf("functionDeclarations[%d] without parametersJsonSchema: %s", i, d.Raw)
		}
		s.tools = append(s.tools, e2eToolSeen{d.Get("name").String(), d.Get("description").String(), d.Get("parametersJsonSchema").Raw})
	}
	contents := b.Get("contents").Array()
	if r := e2eRoles(contents, "role"); r != "user" && r != "user,model,user" {
		return nil, fmt.Errorf("content roles %q", r)
	}
	for _, p := range contents[0].Get("parts").Array() {
		if !p.Get("text").Exists() {
			return nil, fmt.Errorf("contents[0]: want text parts, got %s", p.Raw)
		}
		s.user += p.Get("text").String()
	}
	if len(contents) == 1 {
		return s, nil
	}
	for j, p := range contents[1].Get("parts").Array() {
		switch {
		case p.Get("functionCall").Exists():
			fc := p.Get("functionCall")
			if s.callName != "" || !fc.Get("args").IsObject() {
				return nil, fmt.Errorf("contents[1].parts[%d]: want one functionCall with args, got %s", j, p.Raw)
			}
			s.callName, s.callArgs, s.signature = fc.Get("name").String(), fc.Get("args").Raw, p.Get("thoughtSignature").String()
		case p.Get("text").Exists():
			s.assistant += p.Get("text").String()
		default:
			return nil, fmt.Errorf("contents[1].parts[%d]: unexpected part %s", j, p.Raw)
		}
	}
	parts := contents[2].Get("parts").Array()
	if len(parts) != 1 || !parts[0].Get("functionResponse.response").IsObject() {
		return nil, fmt.Errorf("contents[2].parts: want one functionResponse, got %s", contents[2].Get("parts").Raw)
	}
	s.resultName, s.result = parts[0].Get("functionResponse.name").String(), parts[0].Get("functionResponse.response").Raw
	return s, nil
}

func e2eJSONEqual(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// e2eCheck compares what an upstream received with the conversation.
// callID is the id the upstream gave its call in turn 1, "*" for any id
// the result answers (the call came from another provider), "" when the
// protocol has none.
func e2eCheck(s *e2eSeen, model, callID string) error {
	var bad []string
	if s.model != model {
		bad = append(bad, fmt.Sprintf("model %q, want %q", s.model, model))
	}
	if s.system != e2eSystem {
		bad = append(bad, fmt.Sprintf("system %q", s.system))
	}
	if len(s.tools) != 1 || s.tools[0].name != e2eTool || s.tools[0].desc != e2eToolDesc || !e2eJSONEqual(s.tools[0].schema, e2eSchema) {
		bad = append(bad, fmt.Sprintf("tools %+v", s.tools))
	}
	if s.user != e2eQuestion {
		bad = append(bad, fmt.Sprintf("user %q", s.user))
	}
	if s.turn() == 2 {
		if s.assistant != e2eLead {
			bad = append(bad, fmt.Sprintf("assistant text %q", s.assistant))
		}
		if s.callName != e2eTool || !e2eJSONEqual(s.callArgs, e2eArgs) {
			bad = append(bad, fmt.Sprintf("tool call %s(%s)", s.callName, s.callArgs))
		}
		switch {
		case callID == "*" && (s.callID == "" || s.resultID != s.callID),
			callID != "*" && (s.callID != callID || s.resultID != callID):
			bad = append(bad, fmt.Sprintf("tool call id %q, result for %q, want %q", s.callID, s.resultID, callID))
		}
		if s.result != e2eResult && !e2eJSONEqual(s.result, e2eResult) {
			bad = append(bad, fmt.Sprintf("tool result %q", s.result))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// e2eFake is a native upstream: it records every problem it finds in a
// request and answers those requests with a 400 naming it.
type e2eFake struct {
	*upstream
	mu       sync.Mutex
	problems []string
	calls    int
}

func (f *e2eFake) problem(w http.ResponseWriter, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	f.mu.Lock()
	f.problems = append(f.problems, msg)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":%q}}`, "fake upstream: "+msg)
}

func (f *e2eFake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.calls
}

// Calls is the number of requests received.
func (f *e2eFake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// verify fails t with the problems found so far.
func (f *e2eFake) verify(t *testing.T, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.problems {
		t.Errorf("%s upstream: %s", name, p)
	}
	f.problems = nil
}

func e2eJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// e2eSSE writes one event (name may be empty) and flushes it, so that
// every piece reaches the gateway as its own read.
func e2eSSE(w http.ResponseWriter, name string, v any, eol string) {
	var data []byte
	if s, ok := v.(string); ok {
		data = []byte(s)
	} else {
		data, _ = json.Marshal(v)
	}
	if name != "" {
		fmt.Fprintf(w, "event: %s%s", name, eol)
	}
	fmt.Fprintf(w, "data: %s%s%s", data, eol, eol)
	w.(http.Flusher).Flush()
}

func e2eStartSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

type obj = map[string]any

// e2eOpenAIUpstream is an OpenAI-compatible upstream under /v1.
func e2eOpenAIUpstream(t *testing.T) *e2eFake {
	f := &e2eFake{}
	f.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		f.count()
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer up-key" || r.Header.Get("X-Api-Key") != "" {
			f.problem(w, "path %s, authorization %q, x-api-key %q", r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
			return
		}
		s, err := e2eReadOpenAI(body)
		if err == nil {
			err = e2eCheck(s, "gpt-up", e2eOpenAICallID)
		}
		if err != nil {
			f.problem(w, "%v in %s", err, body)
			return
		}
		turn := s.turn()
		u := obj{"prompt_tokens": e2eUsage[turn].in, "completion_tokens": e2eUsage[turn].out, "total_tokens": e2eUsage[turn].in + e2eUsage[turn].out}
		if !s.stream {
			msg := obj{"role": "assistant", "content": e2eFinal}
			finish := "stop"
			if turn == 1 {
				msg = obj{"role": "assistant", "content": e2eLead, "tool_calls": []obj{{"id": e2eOpenAICallID, "type": "function",
					"function": obj{"name": e2eTool, "arguments": strings.Join(e2eArgPieces, "")}}}}
				finish = "tool_calls"
			}
			e2eJSON(w, obj{"id": fmt.Sprintf("chatcmpl-%d", turn), "object": "chat.completion", "created": 1, "model": "gpt-up",
				"choices": []obj{{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}}, "usage": u})
			return
		}
		chunk := func(delta obj, finish any) obj {
			return obj{"id": fmt.Sprintf("chatcmpl-%d", turn), "object": "chat.completion.chunk", "created": 1, "model": "gpt-up",
				"choices": []obj{{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}}
		}
		e2eStartSSE(w)
		e2eSSE(w, "", chunk(obj{"role": "assistant", "content": ""}, nil), "\n")
		finish := "stop"
		if turn == 1 {
			e2eSSE(w, "", chunk(obj{"content": e2eLead}, nil), "\n")
			e2eSSE(w, "", chunk(obj{"tool_calls": []obj{{"index": 0, "id": e2eOpenAICallID, "type": "function",
				"function": obj{"name": e2eTool, "arguments": ""}}}}, nil), "\n")
			for _, p := range e2eArgPieces {
				e2eSSE(w, "", chunk(obj{"tool_calls": []obj{{"index": 0, "function": obj{"arguments": p}}}}, nil), "\n")
			}
			finish = "tool_calls"
		} else {
			for _, p := range e2eFinalPieces {
				e2eSSE(w, "", chunk(obj{"content": p}, nil), "\n")
			}
		}
		e2eSSE(w, "", chunk(obj{}, finish), "\n")
		e2eSSE(w, "", obj{"id": fmt.Sprintf("chatcmpl-%d", turn), "object": "chat.completion.chunk", "created": 1, "model": "gpt-up",
			"choices": []obj{}, "usage": u}, "\n")
		e2eSSE(w, "", "[DONE]", "\n")
	})
	return f
}

// e2eAnthropicUpstream is an Anthropic Messages upstream under /v1. With
// overloaded set it checks the request, then fails: a 529 for unary
// requests, an overloaded error event right after message_start for
// streams.
func e2eAnthropicUpstream(t *testing.T, overloaded bool) *e2eFake {
	callID := e2eAnthropicCallID
	if overloaded {
		callID = "*" // turn 1 was served by another provider
	}
	f := &e2eFake{}
	f.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		f.count()
		if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != "up-key" || r.Header.Get("Authorization") != "" ||
			r.Header.Get("Anthropic-Version") == "" {
			f.problem(w, "path %s, x-api-key %q, authorization %q, anthropic-version %q", r.URL.Path,
				r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), r.Header.Get("Anthropic-Version"))
			return
		}
		s, err := e2eReadAnthropic(body)
		if err == nil {
			err = e2eCheck(s, "claude-up", callID)
		}
		if err != nil {
			f.problem(w, "%v in %s", err, body)
			return
		}
		turn := s.turn()
		id := fmt.Sprintf("msg_0%d", turn)
		if overloaded && !s.stream {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(529)
			fmt.Fprint(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		}
		if !s.stream {
			content := []obj{{"type": "text", "text": e2eFinal}}
			stop := "end_turn"
			if turn == 1 {
				content = []obj{{"type": "text", "text": e2eLead}, {"type": "tool_use", "id": e2eAnthropicCallID, "name": e2eTool, "input": json.RawMessage(e2eArgs)}}
				stop = "tool_use"
			}
			e2eJSON(w, obj{"id": id, "type": "message", "role": "assistant", "model": "claude-up", "content": content,
				"stop_reason": stop, "stop_sequence": nil, "usage": obj{"input_tokens": e2eUsage[turn].in, "output_tokens": e2eUsage[turn].out}})
			return
		}
		e2eStartSSE(w)
		e2eSSE(w, "message_start", obj{"type": "message_start", "message": obj{"id": id, "type": "message", "role": "assistant",
			"model": "claude-up", "content": []obj{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": obj{"input_tokens": e2eUsage[turn].in, "output_tokens": 1}}}, "\n")
		if overloaded {
			e2eSSE(w, "error", obj{"type": "error", "error": obj{"type": "overloaded_error", "message": "Overloaded"}}, "\n")
			return
		}
		e2eSSE(w, "content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "text", "text": ""}}, "\n")
		e2eSSE(w, "ping", obj{"type": "ping"}, "\n")
		stop := "end_turn"
		if turn == 1 {
			e2eSSE(w, "content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "text_delta", "text": e2eLead}}, "\n")
			e2eSSE(w, "content_block_stop", obj{"type": "content_block_stop", "index": 0}, "\n")
			e2eSSE(w, "content_block_start", obj{"type": "content_block_start", "index": 1,
				"content_block": obj{"type": "tool_use", "id": e2eAnthropicCallID, "name": e2eTool, "input": obj{}}}, "\n")
			e2eSSE(w, "content_block_delta", obj{"type": "content_block_delta", "index": 1, "delta": obj{"type": "input_json_delta", "partial_json": ""}}, "\n")
			for _, p := range e2eArgPieces {
				e2eSSE(w, "content_block_delta", obj{"type": "content_block_delta", "index": 1, "delta": obj{"type": "input_json_delta", "partial_json": p}}, "\n")
			}
			e2eSSE(w, "content_block_stop", obj{"type": "content_block_stop", "index": 1}, "\n")
			stop = "tool_use"
		} else {
			for _, p := range e2eFinalPieces {
				e2eSSE(w, "content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "text_delta", "text": p}}, "\n")
			}
			e2eSSE(w, "content_block_stop", obj{"type": "content_block_stop", "index": 0}, "\n")
		}
		e2eSSE(w, "message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": stop, "stop_sequence": nil},
			"usage": obj{"output_tokens": e2eUsage[turn].out}}, "\n")
		e2eSSE(w, "message_stop", obj{"type": "message_stop"}, "\n")
	})
	return f
}

// e2eGeminiUpstream is a Gemini upstream under /v1beta: generateContent,
// and streamGenerateContent?alt=sse with CRLF-framed events and no
// terminal event. Function calls arrive whole (Gemini does not stream
// arguments) and carry a thought signature that must come back in turn 2.
func e2eGeminiUpstream(t *testing.T) *e2eFake {
	f := &e2eFake{}
	f.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		f.count()
		stream := strings.HasSuffix(r.URL.Path, ":streamGenerateContent")
		if (r.URL.Path != "/v1beta/models/gemini-up:generateContent" && r.URL.Path != "/v1beta/models/gemini-up:streamGenerateContent") ||
			stream != (r.URL.Query().Get("alt") == "sse") || r.URL.Query().Has("key") ||
			r.Header.Get("X-Goog-Api-Key") != "up-key" || r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
			f.problem(w, "url %s, x-goog-api-key %q, authorization %q, x-api-key %q", r.URL, r.Header.Get("X-Goog-Api-Key"),
				r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
			return
		}
		s, err := e2eReadGemini(body)
		if err == nil {
			s.model = "gemini-up" // in the path
			err = e2eCheck(s, "gemini-up", "")
		}
		if err == nil && s.turn() == 2 && (s.signature != e2eSig || s.resultName != e2eTool) {
			err = fmt.Errorf("thoughtSignature %q (want %q), functionResponse.name %q", s.signature, e2eSig, s.resultName)
		}
		if err != nil {
			f.problem(w, "%v in %s", err, body)
			return
		}
		turn := s.turn()
		usage := func(out int64) obj {
			return obj{"promptTokenCount": e2eUsage[turn].in, "candidatesTokenCount": out, "totalTokenCount": e2eUsage[turn].in + out}
		}
		answer := func(parts []obj, finish string, out int64) obj {
			c := obj{"content": obj{"role": "model", "parts": parts}, "index": 0}
			if finish != "" {
				c["finishReason"] = finish
			}
			return obj{"candidates": []obj{c}, "usageMetadata": usage(out), "modelVersion": "gemini-up-001", "responseId": fmt.Sprintf("resp-t%d", turn)}
		}
		call := obj{"functionCall": obj{"name": e2eTool, "args": json.RawMessage(e2eArgs)}, "thoughtSignature": e2eSig}
		if !stream {
			parts := []obj{{"text": e2eFinal}}
			if turn == 1 {
				parts = []obj{{"text": e2eLead}, call}
			}
			e2eJSON(w, answer(parts, "STOP", e2eUsage[turn].out))
			return
		}
		e2eStartSSE(w)
		if turn == 1 {
			e2eSSE(w, "", answer([]obj{{"text": e2eLead}}, "", 3), "\r\n")
			e2eSSE(w, "", answer([]obj{call}, "STOP", e2eUsage[turn].out), "\r\n")
			return
		}
		e2eSSE(w, "", answer([]obj{{"text": e2eFinalPieces[0]}}, "", 4), "\r\n")
		e2eSSE(w, "", answer([]obj{{"text": e2eFinalPieces[1]}}, "STOP", e2eUsage[turn].out), "\r\n")
	})
	return f
}

// e2eWant is what a client must see, beyond the conversation itself.
type e2eWant struct {
	provider  string // X-Switchboard-Provider
	callID    string // the tool call id; "" = any non-empty id
	argPieces int    // streams: arguments deltas the client receives
}

func e2eSchemaMap(t *testing.T) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(e2eSchema), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func e2eCheckProvider(t *testing.T, resp *http.Response, want string) {
	t.Helper()
	if resp == nil {
		t.Fatal("no http response captured")
	}
	if got := resp.Header.Get("X-Switchboard-Provider"); got != want {
		t.Errorf("served by %q, want %q", got, want)
	}
}

// e2eOpenAIConversation holds the two-turn conversation through the
// OpenAI SDK on /v1/chat/completions.
func e2eOpenAIConversation(t *testing.T, gwURL, model string, stream bool, want e2eWant) {
	t.Helper()
	client := openai.NewClient(option.WithBaseURL(gwURL+"/v1"), option.WithAPIKey("gw-key"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(e2eSystem), openai.UserMessage(e2eQuestion)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: e2eTool, Description: openai.String(e2eToolDesc), Parameters: e2eSchemaMap(t)})},
	}
	if stream {
		params.StreamOptions.IncludeUsage = openai.Bool(true)
	}
	turn := func(n int) (openai.ChatCompletionChoice, openai.CompletionUsage, int) {
		t.Helper()
		var resp *http.Response
		var c *openai.ChatCompletion
		pieces := 0
		if stream {
			s := client.Chat.Completions.NewStreaming(context.Background(), params, option.WithResponseInto(&resp))
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				ch := s.Current()
				if !acc.AddChunk(ch) {
					t.Fatalf("turn %d: the accumulator refused chunk %s", n, ch.RawJSON())
				}
				for _, c := range ch.Choices {
					for _, tc := range c.Delta.ToolCalls {
						if tc.Function.Arguments != "" {
							pieces++
						}
					}
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("turn %d: %v", n, err)
			}
			_ = s.Close()
			c = &acc.ChatCompletion
		} else {
			var err error
			if c, err = client.Chat.Completions.New(context.Background(), params, option.WithResponseInto(&resp)); err != nil {
				t.Fatalf("turn %d: %v", n, err)
			}
		}
		e2eCheckProvider(t, resp, want.provider)
		if len(c.Choices) != 1 {
			t.Fatalf("turn %d: %d choices", n, len(c.Choices))
		}
		return c.Choices[0], c.Usage, pieces
	}
	checkUsage := func(n int, u openai.CompletionUsage) {
		t.Helper()
		w := e2eUsage[n]
		if u.PromptTokens != w.in || u.CompletionTokens != w.out || u.TotalTokens != w.in+w.out {
			t.Errorf("turn %d usage %d+%d=%d, want %d+%d", n, u.PromptTokens, u.CompletionTokens, u.TotalTokens, w.in, w.out)
		}
	}

	// Turn 1: the model calls the tool.
	ch, usage, pieces := turn(1)
	m := ch.Message
	if ch.FinishReason != "tool_calls" || m.Content != e2eLead || len(m.ToolCalls) != 1 {
		t.Fatalf("turn 1: finish %q content %q tool calls %+v", ch.FinishReason, m.Content, m.ToolCalls)
	}
	call := m.ToolCalls[0]
	if call.Type != "function" || call.Function.Name != e2eTool || !e2eJSONEqual(call.Function.Arguments, e2eArgs) {
		t.Errorf("turn 1: tool call %s %s(%s)", call.Type, call.Function.Name, call.Function.Arguments)
	}
	if call.ID == "" || (want.callID != "" && call.ID != want.callID) {
		t.Errorf("turn 1: tool call id %q, want %q", call.ID, want.callID)
	}
	if stream && pieces != want.argPieces {
		t.Errorf("turn 1: arguments arrived in %d pieces, want %d", pieces, want.argPieces)
	}
	checkUsage(1, usage)

	// Turn 2: the tool result goes back; the model answers.
	params.Messages = append(params.Messages, m.ToParam(), openai.ToolMessage(e2eResult, call.ID))
	ch, usage, _ = turn(2)
	if ch.FinishReason != "stop" || ch.Message.Content != e2eFinal || len(ch.Message.ToolCalls) != 0 {
		t.Errorf("turn 2: finish %q content %q tool calls %+v", ch.FinishReason, ch.Message.Content, ch.Message.ToolCalls)
	}
	checkUsage(2, usage)
}

// e2eAnthropicConversation holds the two-turn conversation through the
// Anthropic SDK on /v1/messages.
func e2eAnthropicConversation(t *testing.T, gwURL, model string, stream bool, want e2eWant) {
	t.Helper()
	client := anthropic.NewClient(aoption.WithBaseURL(gwURL), aoption.WithAPIKey("gw-key"), aoption.WithMaxRetries(0))
	schema := e2eSchemaMap(t)
	params := anthropic.MessageNewParams{
		Model:     model,
		MaxTokens: 512,
		System:    []anthropic.TextBlockParam{{Text: e2eSystem}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(e2eQuestion))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: e2eTool, Description: anthropic.String(e2eToolDesc),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: schema["properties"], Required: []string{"city"}}}}},
	}
	turn := func(n int) (*anthropic.Message, int) {
		t.Helper()
		var resp *http.Response
		msg := &anthropic.Message{}
		pieces := 0
		if stream {
			s := client.Messages.NewStreaming(context.Background(), params, aoption.WithResponseInto(&resp))
			for s.Next() {
				ev := s.Current()
				if err := msg.Accumulate(ev); err != nil {
					t.Fatalf("turn %d: accumulate %s: %v", n, ev.RawJSON(), err)
				}
				if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" && ev.Delta.PartialJSON != "" {
					pieces++
				}
			}
			if err := s.Err(); err != nil {
				t.Fatalf("turn %d: %v", n, err)
			}
			_ = s.Close()
		} else {
			var err error
			if msg, err = client.Messages.New(context.Background(), params, aoption.WithResponseInto(&resp)); err != nil {
				t.Fatalf("turn %d: %v", n, err)
			}
		}
		e2eCheckProvider(t, resp, want.provider)
		if msg.Role != "assistant" {
			t.Errorf("turn %d: role %q", n, msg.Role)
		}
		w := e2eUsage[n]
		if msg.Usage.InputTokens != w.in || msg.Usage.OutputTokens != w.out {
			t.Errorf("turn %d usage in=%d out=%d, want %d %d", n, msg.Usage.InputTokens, msg.Usage.OutputTokens, w.in, w.out)
		}
		return msg, pieces
	}

	// Turn 1: the model calls the tool.
	msg, pieces := turn(1)
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 2 || msg.Content[0].Type != "text" ||
		msg.Content[0].Text != e2eLead || msg.Content[1].Type != "tool_use" {
		t.Fatalf("turn 1: stop %q content %s", msg.StopReason, e2eBlocks(msg))
	}
	tu := msg.Content[1].AsToolUse()
	if tu.Name != e2eTool || !e2eJSONEqual(string(tu.Input), e2eArgs) {
		t.Errorf("turn 1: tool use %s(%s)", tu.Name, tu.Input)
	}
	if tu.ID == "" || (want.callID != "" && tu.ID != want.callID) {
		t.Errorf("turn 1: tool use id %q, want %q", tu.ID, want.callID)
	}
	if stream && pieces != want.argPieces {
		t.Errorf("turn 1: input_json_delta pieces %d, want %d", pieces, want.argPieces)
	}

	// Turn 2: the tool result goes back; the model answers.
	params.Messages = append(params.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(tu.ID, e2eResult, false)))
	msg, _ = turn(2)
	if msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != e2eFinal {
		t.Errorf("turn 2: stop %q content %s", msg.StopReason, e2eBlocks(msg))
	}
}

func e2eBlocks(m *anthropic.Message) string {
	var parts []string
	for _, c := range m.Content {
		parts = append(parts, c.RawJSON())
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func e2eRequests(u *upstream) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.bodies)
}

func e2eModes() []bool { return []bool{false, true} }

func e2eMode(stream bool) string {
	if stream {
		return "stream"
	}
	return "unary"
}

// TestE2ETranslateToolConversation: {OpenAI SDK, Anthropic SDK} ×
// {openai, anthropic, gemini upstream} × {unary, streaming}, two turns each.
func TestE2ETranslateToolConversation(t *testing.T) {
	oa, an, ge := e2eOpenAIUpstream(t), e2eAnthropicUpstream(t, false), e2eGeminiUpstream(t)
	g := startGateway(t, fmt.Sprintf(`providers:
  oa: {type: openai, base_url: %s/v1, api_key: up-key}
  an: {type: anthropic, base_url: %s/v1, api_key: up-key}
  ge: {type: gemini, base_url: %s/v1beta, api_key: up-key}
models:
  - name: via-openai
    providers: [{provider: oa, model: gpt-up}]
  - name: via-anthropic
    providers: [{provider: an, model: claude-up}]
  - name: via-gemini
    providers: [{provider: ge, model: gemini-up}]
auth: {token: gw-key}
performance: {probing_enabled: false}
retries: {max_attempts: 1, max_rounds: 1}
`, oa.URL, an.URL, ge.URL))
	upstreams := []struct {
		name, model string
		fake        *e2eFake
		want        e2eWant
	}{
		{"openai", "via-openai", oa, e2eWant{provider: "oa", callID: e2eOpenAICallID, argPieces: len(e2eArgPieces)}},
		{"anthropic", "via-anthropic", an, e2eWant{provider: "an", callID: e2eAnthropicCallID, argPieces: len(e2eArgPieces)}},
		// Gemini sends a call whole: one piece; the id is the gateway's,
		// carrying the thought signature the fake checks in turn 2.
		{"gemini", "via-gemini", ge, e2eWant{provider: "ge", argPieces: 1}},
	}
	for _, up := range upstreams {
		for _, stream := range e2eModes() {
			t.Run("openai-sdk/"+up.name+"/"+e2eMode(stream), func(t *testing.T) {
				before := up.fake.Calls()
				defer up.fake.verify(t, up.name)
				e2eOpenAIConversation(t, g.URL, up.model, stream, up.want)
				if n := up.fake.Calls() - before; n != 2 {
					t.Errorf("%s upstream got %d requests, want 2", up.name, n)
				}
			})
			t.Run("anthropic-sdk/"+up.name+"/"+e2eMode(stream), func(t *testing.T) {
				before := up.fake.Calls()
				defer up.fake.verify(t, up.name)
				e2eAnthropicConversation(t, g.URL, up.model, stream, up.want)
				if n := up.fake.Calls() - before; n != 2 {
					t.Errorf("%s upstream got %d requests, want 2", up.name, n)
				}
			})
		}
	}
}

// TestE2ETranslateFallbackAcrossProtocols: a model whose Anthropic provider
// is overloaded (529 unary, an overloaded error event before the first
// token when streaming) falls back to its Gemini provider; neither SDK can
// tell.
func TestE2ETranslateFallbackAcrossProtocols(t *testing.T) {
	clients := []struct {
		name string
		run  func(*testing.T, string, string, bool, e2eWant)
	}{{"openai-sdk", e2eOpenAIConversation}, {"anthropic-sdk", e2eAnthropicConversation}}
	for _, c := range clients {
		for _, stream := range e2eModes() {
			t.Run(c.name+"/"+e2eMode(stream), func(t *testing.T) {
				an, ge := e2eAnthropicUpstream(t, true), e2eGeminiUpstream(t)
				g := startGateway(t, fmt.Sprintf(`providers:
  an: {type: anthropic, base_url: %s/v1, api_key: up-key}
  ge: {type: gemini, base_url: %s/v1beta, api_key: up-key}
models:
  - name: mixed
    providers:
      - {provider: an, model: claude-up}
      - {provider: ge, model: gemini-up}
auth: {token: gw-key}
performance: {probing_enabled: false}
retries: {max_attempts: 1, max_rounds: 1}
`, an.URL, ge.URL))
				defer an.verify(t, "anthropic")
				defer ge.verify(t, "gemini")
				c.run(t, g.URL, "mixed", stream, e2eWant{provider: "ge", argPieces: 1})
				if an.Calls() != 2 || ge.Calls() != 2 {
					t.Errorf("calls: anthropic %d, gemini %d; want 2 each (every turn tried anthropic first)", an.Calls(), ge.Calls())
				}
			})
		}
	}
}

// TestE2EAnthropicSDKErrors: the Anthropic SDK gets its own error type
// with the right status from every upstream protocol.
func TestE2EAnthropicSDKErrors(t *testing.T) {
	limited := func(ct, body string) *upstream {
		return newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.Header().Set("Content-Type", ct)
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, body)
		})
	}
	oa := limited("application/json", `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	an := limited("application/json", `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
	ge := limited("application/json; charset=UTF-8", `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`)
	g := startGateway(t, fmt.Sprintf(`providers:
  oa: {type: openai, base_url: %s/v1, api_key: up-key}
  an: {type: anthropic, base_url: %s/v1, api_key: up-key}
  ge: {type: gemini, base_url: %s/v1beta, api_key: up-key}
models:
  - name: via-openai
    providers: [{provider: oa, model: gpt-up}]
  - name: via-anthropic
    providers: [{provider: an, model: claude-up}]
  - name: via-gemini
    providers: [{provider: ge, model: gemini-up}]
auth: {token: gw-key}
performance: {probing_enabled: false}
retries: {max_attempts: 1, max_rounds: 1}
`, oa.URL, an.URL, ge.URL))
	client := anthropic.NewClient(aoption.WithBaseURL(g.URL), aoption.WithAPIKey("gw-key"), aoption.WithMaxRetries(0))
	params := func(model string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: model, MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(e2eQuestion))}}
	}
	call := func(model string, stream bool) error {
		if !stream {
			_, err := client.Messages.New(context.Background(), params(model))
			return err
		}
		s := client.Messages.NewStreaming(context.Background(), params(model))
		defer s.Close()
		for s.Next() {
		}
		if s.Err() == nil {
			return errors.New("the stream ended without an error")
		}
		return s.Err()
	}
	asError := func(t *testing.T, err error, status int, typ string) *anthropic.Error {
		t.Helper()
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("err = %v (%T), want *anthropic.Error", err, err)
		}
		if apiErr.StatusCode != status || string(apiErr.Type()) != typ {
			t.Fatalf("status %d type %q, want %d %q: %v", apiErr.StatusCode, apiErr.Type(), status, typ, err)
		}
		return apiErr
	}

	for _, stream := range e2eModes() {
		t.Run("unknown model/"+e2eMode(stream), func(t *testing.T) {
			apiErr := asError(t, call("no-such-model", stream), http.StatusNotFound, "not_found_error")
			if !strings.Contains(apiErr.Message, "no-such-model") {
				t.Errorf("message %q does not name the model", apiErr.Message)
			}
		})
	}
	upstreams := []struct {
		name, model, message string
		u                    *upstream
	}{
		{"openai", "via-openai", "Rate limit reached for requests", oa},
		{"anthropic", "via-anthropic", "per-minute rate limit", an},
		{"gemini", "via-gemini", "Resource has been exhausted", ge},
	}
	for _, up := range upstreams {
		for _, stream := range e2eModes() {
			t.Run("429 from "+up.name+"/"+e2eMode(stream), func(t *testing.T) {
				before := e2eRequests(up.u)
				apiErr := asError(t, call(up.model, stream), http.StatusTooManyRequests, "rate_limit_error")
				if got := apiErr.Response.Header.Get("Retry-After"); got != "7" {
					t.Errorf("Retry-After = %q, want 7", got)
				}
				if !strings.Contains(apiErr.Message, up.message) {
					t.Errorf("message %q lost the upstream's %q", apiErr.Message, up.message)
				}
				if n := e2eRequests(up.u) - before; n != 1 {
					t.Errorf("upstream got %d requests, want 1 (a 429 is not retried)", n)
				}
			})
		}
	}
}
