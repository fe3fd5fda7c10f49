package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"switchboard/internal/api/openai"
)

// The answer side of the Responses bridge (responses_openai.go): the
// internal answer as a Response object, and the internal chunk stream as
// the Responses event sequence.

func responseID(chatID string) string {
	if chatID == "" {
		return newID("resp_")
	}
	if strings.HasPrefix(chatID, "resp_") {
		return chatID
	}
	return "resp_" + strings.TrimPrefix(chatID, "chatcmpl-")
}

// itemID names the n-th output item of a response: stable for one answer,
// so that a stream's events and its final response agree.
func itemID(prefix, respID string, n int) string {
	return fmt.Sprintf("%s_%s_%d", prefix, strings.TrimPrefix(respID, "resp_"), n)
}

func responsesUsageOf(u Usage) *openai.ResponsesUsage {
	return &openai.ResponsesUsage{InputTokens: u.Input, OutputTokens: u.Output, TotalTokens: u.Input + u.Output,
		InputTokensDetails:  openai.InputTokensDetails{CachedTokens: u.CacheRead, CacheWriteTokens: u.CacheWrite},
		OutputTokensDetails: openai.OutputTokensDetails{ReasoningTokens: u.Reasoning}}
}

// response is the Response object around output, echoing the request.
func (r *ResponsesInbound) response(id, model string, created int64, status string, output []json.RawMessage) *openai.Response {
	e := r.echo
	if output == nil {
		output = []json.RawMessage{}
	}
	one := 1.0
	resp := &openai.Response{ID: id, Object: "response", CreatedAt: created, Status: status, Instructions: e.instructions,
		MaxOutputTokens: e.maxOutput, Model: model, Output: output, ParallelToolCalls: e.parallel, Reasoning: e.reasoning,
		Temperature: e.temperature, Text: e.text, ToolChoice: e.toolChoice, Tools: e.tools, TopP: e.topP,
		Truncation: e.truncation, User: e.user, Metadata: e.metadata}
	if resp.Temperature == nil {
		resp.Temperature = &one
	}
	if resp.TopP == nil {
		resp.TopP = &one
	}
	return resp
}

// finishStatus maps finish_reason to a response status and its details.
func finishStatus(finish string) (string, *openai.IncompleteDetails) {
	switch finish {
	case "length":
		return "incomplete", &openai.IncompleteDetails{Reason: "max_output_tokens"}
	case "content_filter":
		return "incomplete", &openai.IncompleteDetails{Reason: "content_filter"}
	}
	return "completed", nil
}

// callItem is a tool call as the client's output item: a function_call,
// or a custom_tool_call for a custom tool (its input unwrapped).
func (r *ResponsesInbound) callItem(id, callID, name, args, status string) any {
	t, ok := r.tools[name]
	if !ok {
		t = toolName{name: name}
	}
	if t.custom {
		return openai.CustomToolCallItem{ID: "ctc" + strings.TrimPrefix(id, "fc"), Type: "custom_tool_call", Status: status,
			CallID: callID, Name: t.name, Namespace: t.namespace, Input: customInput(args)}
	}
	return openai.FunctionCallItem{ID: id, Type: "function_call", Status: status, CallID: callID, Name: t.name,
		Namespace: t.namespace, Arguments: args}
}

// customInput unwraps a custom tool's {"input": "..."} arguments; a model
// that wrote something else has it passed as is.
func customInput(args string) string {
	var v struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(args), &v) == nil && v.Input != nil {
		return *v.Input
	}
	return args
}

// Answer translates the internal answer (a chat.completion) into a
// Response object, with its usage. model, when not "", names the model;
// else the completion's.
func (r *ResponsesInbound) Answer(chatResp []byte, model string) ([]byte, Usage, error) {
	var c openai.ChatCompletion
	if err := json.Unmarshal(chatResp, &c); err != nil {
		return nil, Usage{}, &ProtocolError{Msg: "answer is not a chat.completion"}
	}
	u := usageFromOpenAI(c.Usage)
	if model == "" {
		model = c.Model
	}
	created := c.Created
	if created == 0 {
		created = r.Created
	}
	id := responseID(c.ID)
	finish := "stop"
	var output []json.RawMessage
	if len(c.Choices) > 0 {
		ch := c.Choices[0]
		finish = ch.FinishReason
		m := ch.Message
		status, _ := finishStatus(finish)
		if th := m.ReasoningContent + m.Reasoning; th != "" && r.summary {
			output = append(output, marshal(openai.ReasoningItem{ID: itemID("rs", id, len(output)), Type: "reasoning",
				Summary: []openai.SummaryText{{Type: "summary_text", Text: th}}}))
		}
		var content []any
		if m.Content != nil && *m.Content != "" {
			content = append(content, openai.OutputText{Type: "output_text", Text: *m.Content,
				Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}})
		}
		if m.Refusal != nil && *m.Refusal != "" {
			content = append(content, openai.OutputRefusal{Type: "refusal", Refusal: *m.Refusal})
		}
		if len(content) > 0 {
			output = append(output, marshal(openai.OutputMessage{ID: itemID("msg", id, len(output)), Type: "message",
				Status: status, Role: "assistant", Content: content}))
		}
		for _, tc := range m.ToolCalls {
			output = append(output, marshal(r.callItem(itemID("fc", id, len(output)), tc.ID, tc.Function.Name,
				tc.Function.Arguments, "completed")))
		}
	}
	status, details := finishStatus(finish)
	resp := r.response(id, model, created, status, output)
	resp.IncompleteDetails = details
	resp.Usage = responsesUsageOf(u)
	return marshal(resp), u, nil
}

// Stream returns the translator of one streamed answer; model is as for
// Answer.
func (r *ResponsesInbound) Stream(model string) *ResponsesStream {
	return &ResponsesStream{r: r, model: model, calls: map[int]*streamItem{}, closed: map[int]bool{}}
}

// ResponsesStream translates the internal chunk stream into the Responses
// event sequence, as OpenAI emits it: response.created and
// response.in_progress, then per output item output_item.added, its
// content (content_part.added, output_text.delta..., output_text.done,
// content_part.done for a message; reasoning_summary_* for reasoning;
// function_call_arguments.delta/.done or custom_tool_call_input.delta/
// .done for a call), output_item.done, and at the end response.completed
// (or response.incomplete) with every item and the usage. Every event
// carries its sequence_number; Event.Name is the event type.
type ResponsesStream struct {
	r                 *ResponsesInbound
	model, id         string
	created           int64
	seq               int64
	started, finished bool
	output            []doneItem          // finished items
	next              int                 // output index of the next item
	open              *streamItem         // the open message or reasoning item
	calls             map[int]*streamItem // open calls by the chunks' tool index
	closed            map[int]bool        // finished calls by tool index
	callOrder         []*streamItem       // open calls, in order
	finish            string
	usage             Usage
}

// doneItem is a finished output item at its output index.
type doneItem struct {
	index int
	item  json.RawMessage
}

// items lists the finished items in output order (a call may finish
// after a message that began later).
func (s *ResponsesStream) items() []json.RawMessage {
	sort.SliceStable(s.output, func(i, j int) bool { return s.output[i].index < s.output[j].index })
	out := make([]json.RawMessage, len(s.output))
	for i, d := range s.output {
		out[i] = d.item
	}
	return out
}

// streamItem is an open output item.
type streamItem struct {
	kind         string // reasoning | message | call
	index        int
	id           string
	text         strings.Builder // summary, or the current content part's text, or arguments
	parts        []any           // a message's finished content parts
	part         string          // a message's open part: output_text | refusal | ""
	callID, name string
}

// Usage implements ClientStream.
func (s *ResponsesStream) Usage() Usage { return s.usage }

func (s *ResponsesStream) ev(v any, typ string) Event {
	e := Event{Name: typ, Data: marshal(v)}
	s.seq++
	return e
}

func (s *ResponsesStream) start(out []Event, c *openai.ChatCompletionChunk) []Event {
	if s.started {
		return out
	}
	s.started = true
	s.id = responseID(c.ID)
	s.created = c.Created
	if s.created == 0 {
		s.created = s.r.Created
	}
	if s.model == "" {
		s.model = c.Model
	}
	for _, typ := range []string{"response.created", "response.in_progress"} {
		out = append(out, s.ev(openai.ResponseEvent{Type: typ, SequenceNumber: s.seq,
			Response: s.r.response(s.id, s.model, s.created, "in_progress", nil)}, typ))
	}
	return out
}

// openItem closes the open message or reasoning item and opens kind.
func (s *ResponsesStream) openItem(out []Event, kind string) []Event {
	out = s.closeOpen(out)
	it := &streamItem{kind: kind, index: s.next}
	s.next++
	s.open = it
	var item any
	switch kind {
	case "reasoning":
		it.id = itemID("rs", s.id, it.index)
		item = openai.ReasoningItem{ID: it.id, Type: "reasoning", Summary: []openai.SummaryText{}}
	default:
		it.id = itemID("msg", s.id, it.index)
		item = openai.OutputMessage{ID: it.id, Type: "message", Status: "in_progress", Role: "assistant", Content: []any{}}
	}
	out = append(out, s.ev(openai.OutputItemEvent{Type: "response.output_item.added", SequenceNumber: s.seq,
		OutputIndex: it.index, Item: item}, "response.output_item.added"))
	if kind == "reasoning" {
		out = append(out, s.ev(openai.SummaryPartEvent{Type: "response.reasoning_summary_part.added", SequenceNumber: s.seq,
			ItemID: it.id, OutputIndex: it.index, Part: openai.SummaryText{Type: "summary_text"}}, "response.reasoning_summary_part.added"))
	}
	return out
}

// messagePart opens a content part of kind (output_text or refusal) in
// the open message, closing another kind's part first.
func (s *ResponsesStream) messagePart(out []Event, kind string) []Event {
	it := s.open
	if it.part == kind {
		return out
	}
	out = s.closePart(out)
	it.part = kind
	var part any = openai.OutputText{Type: "output_text", Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}}
	if kind == "refusal" {
		part = openai.OutputRefusal{Type: "refusal"}
	}
	return append(out, s.ev(openai.ContentPartEvent{Type: "response.content_part.added", SequenceNumber: s.seq,
		ItemID: it.id, OutputIndex: it.index, ContentIndex: len(it.parts), Part: part}, "response.content_part.added"))
}

func (s *ResponsesStream) closePart(out []Event) []Event {
	it := s.open
	if it == nil || it.part == "" {
		return out
	}
	text, ci := it.text.String(), len(it.parts)
	var part any
	if it.part == "refusal" {
		part = openai.OutputRefusal{Type: "refusal", Refusal: text}
		out = append(out, s.ev(openai.RefusalDoneEvent{Type: "response.refusal.done", SequenceNumber: s.seq, ItemID: it.id,
			OutputIndex: it.index, ContentIndex: ci, Refusal: text}, "response.refusal.done"))
	} else {
		part = openai.OutputText{Type: "output_text", Text: text, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}}
		out = append(out, s.ev(openai.TextDoneEvent{Type: "response.output_text.done", SequenceNumber: s.seq, ItemID: it.id,
			OutputIndex: it.index, ContentIndex: ci, Text: text, Logprobs: []json.RawMessage{}}, "response.output_text.done"))
	}
	out = append(out, s.ev(openai.ContentPartEvent{Type: "response.content_part.done", SequenceNumber: s.seq, ItemID: it.id,
		OutputIndex: it.index, ContentIndex: ci, Part: part}, "response.content_part.done"))
	it.parts = append(it.parts, part)
	it.part = ""
	it.text.Reset()
	return out
}

// closeOpen finishes the open message or reasoning item.
func (s *ResponsesStream) closeOpen(out []Event) []Event {
	it := s.open
	if it == nil {
		return out
	}
	var item any
	if it.kind == "reasoning" {
		text := it.text.String()
		sum := openai.SummaryText{Type: "summary_text", Text: text}
		out = append(out,
			s.ev(openai.SummaryTextDoneEvent{Type: "response.reasoning_summary_text.done", SequenceNumber: s.seq, ItemID: it.id,
				OutputIndex: it.index, Text: text}, "response.reasoning_summary_text.done"),
			s.ev(openai.SummaryPartEvent{Type: "response.reasoning_summary_part.done", SequenceNumber: s.seq, ItemID: it.id,
				OutputIndex: it.index, Part: sum}, "response.reasoning_summary_part.done"))
		item = openai.ReasoningItem{ID: it.id, Type: "reasoning", Summary: []openai.SummaryText{sum}}
	} else {
		out = s.closePart(out)
		status, _ := finishStatus(s.finish)
		item = openai.OutputMessage{ID: it.id, Type: "message", Status: status, Role: "assistant", Content: it.parts}
	}
	s.open = nil
	return s.itemDone(out, it.index, item)
}

func (s *ResponsesStream) itemDone(out []Event, index int, item any) []Event {
	s.output = append(s.output, doneItem{index, marshal(item)})
	return append(out, s.ev(openai.OutputItemEvent{Type: "response.output_item.done", SequenceNumber: s.seq,
		OutputIndex: index, Item: item}, "response.output_item.done"))
}

// closeCalls finishes every open tool call, in order.
func (s *ResponsesStream) closeCalls(out []Event) []Event {
	for tool := range s.calls {
		s.closed[tool] = true
	}
	for _, it := range s.callOrder {
		args := it.text.String()
		item := s.r.callItem(it.id, it.callID, it.name, args, "completed")
		if ci, ok := item.(openai.CustomToolCallItem); ok {
			out = append(out,
				s.ev(openai.ArgumentsDeltaEvent{Type: "response.custom_tool_call_input.delta", SequenceNumber: s.seq,
					ItemID: ci.ID, OutputIndex: it.index, Delta: ci.Input}, "response.custom_tool_call_input.delta"),
				s.ev(openai.CustomInputDoneEvent{Type: "response.custom_tool_call_input.done", SequenceNumber: s.seq,
					ItemID: ci.ID, OutputIndex: it.index, Input: ci.Input}, "response.custom_tool_call_input.done"))
		} else {
			fc := item.(openai.FunctionCallItem)
			out = append(out, s.ev(openai.ArgumentsDoneEvent{Type: "response.function_call_arguments.done", SequenceNumber: s.seq,
				ItemID: it.id, OutputIndex: it.index, Name: fc.Name, Arguments: args}, "response.function_call_arguments.done"))
		}
		out = s.itemDone(out, it.index, item)
	}
	s.callOrder = nil
	s.calls = map[int]*streamItem{}
	return out
}

// Chunk implements ClientStream.
func (s *ResponsesStream) Chunk(data []byte) ([]Event, error) {
	c, evs, ok, err := nextChunk(s, s.finished, data)
	if !ok {
		return evs, err
	}
	out := s.start(nil, &c)
	if c.Usage != nil {
		s.usage = usageFromOpenAI(c.Usage)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // a response has one answer
		}
		d := ch.Delta
		if th := strOr(d.ReasoningContent) + strOr(d.Reasoning); th != "" && s.r.summary {
			if s.open == nil || s.open.kind != "reasoning" {
				out = s.openItem(out, "reasoning")
			}
			it := s.open
			it.text.WriteString(th)
			out = append(out, s.ev(openai.SummaryTextDeltaEvent{Type: "response.reasoning_summary_text.delta", SequenceNumber: s.seq,
				ItemID: it.id, OutputIndex: it.index, Delta: th}, "response.reasoning_summary_text.delta"))
		}
		for _, k := range []struct{ kind, text string }{{"output_text", strOr(d.Content)}, {"refusal", strOr(d.Refusal)}} {
			if k.text == "" {
				continue
			}
			if s.open == nil || s.open.kind != "message" {
				out = s.openItem(out, "message")
			}
			out = s.messagePart(out, k.kind)
			it := s.open
			it.text.WriteString(k.text)
			if k.kind == "refusal" {
				out = append(out, s.ev(openai.RefusalDeltaEvent{Type: "response.refusal.delta", SequenceNumber: s.seq, ItemID: it.id,
					OutputIndex: it.index, ContentIndex: len(it.parts), Delta: k.text}, "response.refusal.delta"))
			} else {
				out = append(out, s.ev(openai.TextDeltaEvent{Type: "response.output_text.delta", SequenceNumber: s.seq, ItemID: it.id,
					OutputIndex: it.index, ContentIndex: len(it.parts), Delta: k.text, Logprobs: []json.RawMessage{}}, "response.output_text.delta"))
			}
		}
		for _, tc := range d.ToolCalls {
			out = s.toolDelta(out, tc)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
			out = s.closeOpen(out)
			out = s.closeCalls(out)
		}
	}
	return out, nil
}

func (s *ResponsesStream) toolDelta(out []Event, tc openai.ToolCallDelta) []Event {
	it, ok := s.calls[tc.Index]
	if !ok {
		if s.closed[tc.Index] {
			return out // a finished call: chat streams send calls one after another
		}
		// Calls stream one after another: a new one finishes the last.
		out = s.closeOpen(out)
		out = s.closeCalls(out)
		it = &streamItem{kind: "call", index: s.next, callID: tc.ID, name: tc.Function.Name}
		if it.callID == "" {
			it.callID = newID("call_")
		}
		s.next++
		it.id = itemID("fc", s.id, it.index)
		s.calls[tc.Index] = it
		s.callOrder = append(s.callOrder, it)
		out = append(out, s.ev(openai.OutputItemEvent{Type: "response.output_item.added", SequenceNumber: s.seq,
			OutputIndex: it.index, Item: s.r.callItem(it.id, it.callID, it.name, "", "in_progress")}, "response.output_item.added"))
	}
	a := strOr(tc.Function.Arguments)
	if a == "" {
		return out
	}
	it.text.WriteString(a)
	if s.r.tools[it.name].custom {
		return out // a custom tool's input is sent whole once known
	}
	return append(out, s.ev(openai.ArgumentsDeltaEvent{Type: "response.function_call_arguments.delta", SequenceNumber: s.seq,
		ItemID: it.id, OutputIndex: it.index, Delta: a}, "response.function_call_arguments.delta"))
}

// Finish implements ClientStream: every open item is finished and
// response.completed (response.incomplete when the answer was cut by
// its token limit or a content filter) carries the whole response.
func (s *ResponsesStream) Finish() []Event {
	if s.finished {
		return nil
	}
	out := s.start(nil, &openai.ChatCompletionChunk{})
	s.finished = true
	out = s.closeOpen(out)
	out = s.closeCalls(out)
	status, details := finishStatus(s.finish)
	resp := s.r.response(s.id, s.model, s.created, status, s.items())
	resp.IncompleteDetails = details
	resp.Usage = responsesUsageOf(s.usage)
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	return append(out, s.ev(openai.ResponseEvent{Type: typ, SequenceNumber: s.seq, Response: resp}, typ))
}

// Fail implements ClientStream: a started stream ends with
// response.failed carrying the error (and the items finished so far);
// before response.created there is no response to fail, so an error
// event is sent instead.
func (s *ResponsesStream) Fail(status int, body []byte) []Event {
	if s.finished {
		return nil
	}
	s.finished = true
	msg := errorMessage(body)
	if msg == "" {
		msg = http.StatusText(status)
	}
	code := errorCode(body)
	if code == "" {
		code = "server_error"
		if status == http.StatusTooManyRequests {
			code = "rate_limit_exceeded"
		}
	}
	if !s.started {
		return []Event{s.ev(openai.ErrorEvent{Type: "error", SequenceNumber: s.seq, Code: &code, Message: msg}, "error")}
	}
	resp := s.r.response(s.id, s.model, s.created, "failed", s.items())
	resp.Error = &openai.ResponseError{Code: code, Message: msg}
	return []Event{s.ev(openai.ResponseEvent{Type: "response.failed", SequenceNumber: s.seq, Response: resp}, "response.failed")}
}

// errorCode reads error.code from an error body of OpenAI's shape.
func errorCode(body []byte) string {
	var e openai.ErrorResponse
	if json.Unmarshal(body, &e) == nil && e.Error.Code != nil {
		return *e.Error.Code
	}
	return ""
}

// ResponsesErrorEvent is the Responses stream's error event, for a
// failure before any response event was sent.
func ResponsesErrorEvent(status int, body []byte) Event {
	s := &ResponsesStream{r: &ResponsesInbound{}}
	return s.Fail(status, body)[0]
}
