package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"switchboard/internal/api/anthropic"
	"switchboard/internal/api/openai"
)

// messagesFields is what FromMessages does with each Messages field.
var messagesFields = map[string]fieldRule{
	"model": mapped, "max_tokens": mapped, "messages": mapped, "system": mapped, "stop_sequences": mapped,
	"temperature": mapped, "top_p": mapped, "top_k": mapped, "stream": mapped, "tools": mapped,
	"tool_choice": mapped, "thinking": mapped, "metadata": mapped, "output_config": mapped, "output_format": mapped,
	// Hints: a processing tier, prompt caching, where or how fast to run,
	// cache diagnostics, anthropic's own fallbacks and billing, and
	// context editing (the target gets the whole context instead).
	"service_tier": dropped, "cache_control": dropped, "context_management": dropped, "inference_geo": dropped,
	"speed": dropped, "diagnostics": dropped, "fallbacks": dropped, "fallback_credit_token": dropped,
	"billing_policy": dropped,
}

// messagesRefusals are Messages fields whose answer needs anthropic itself.
var messagesRefusals = map[string]refusal{
	"container":   "a code-execution container exists only on anthropic providers",
	"mcp_servers": "MCP servers are reached by anthropic's own API; other providers cannot call them",
	"compaction":  "a compaction request needs anthropic's own summarizer",
	"thread":      "a server-held conversation exists only at anthropic",
}

// MessagesToChat translates an Anthropic Messages request into the
// internal form; it is FromMessages without the list of dropped hints.
func MessagesToChat(body []byte) ([]byte, error) {
	in, err := FromMessages(body)
	if err != nil {
		return nil, err
	}
	return in.Body, nil
}

// FromMessages translates an Anthropic Messages request (POST
// /v1/messages) into the internal form, an OpenAI chat request, for a
// provider that is not anthropic (an anthropic provider takes the
// client's body as is). A *FieldError refuses the request; the answer
// comes back through ChatToMessages or a MessagesStream.
func FromMessages(body []byte) (*Inbound, error) {
	var d drops
	if err := classify(body, messagesFields, messagesRefusals, "the gateway's /v1/messages translation", &d); err != nil {
		return nil, err
	}
	var in anthropic.Request
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, decodeErr(err)
	}
	out := openai.ChatRequest{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK, Stream: in.Stream}
	if in.MaxTokens < 1 {
		return nil, fieldErr("max_tokens", "required, at least 1")
	}
	out.MaxTokens = ptr(in.MaxTokens)
	if in.Stream {
		out.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	if len(in.StopSequences) > 0 {
		out.Stop = marshal(in.StopSequences)
	}
	if in.Metadata != nil {
		out.User = in.Metadata.UserID
	}
	effort, err := messagesEffort(&in, &d)
	if err != nil {
		return nil, err
	}
	out.ReasoningEffort = effort
	if err := messagesFormat(&in, &out); err != nil {
		return nil, err
	}
	if err := chatTools(&in, &out, &d); err != nil {
		return nil, err
	}
	sys, err := systemText(in.System, "system", &d)
	if err != nil {
		return nil, err
	}
	if sys != "" {
		out.Messages = append(out.Messages, openai.Message{Role: "system", Content: marshal(sys)})
	}
	for i, m := range in.Messages {
		f := fmt.Sprintf("messages[%d]", i)
		d.addRaw(f+".output_config", m.OutputConfig) // a per-turn effort: the request's applies
		msgs, err := chatMessages(m, f, &d)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, msgs...)
	}
	if len(out.Messages) == 0 {
		return nil, fieldErr("messages", "required")
	}
	return &Inbound{Body: marshal(out), Model: in.Model, Stream: in.Stream, Dropped: d.list}, nil
}

// messagesEffort maps thinking and output_config.effort to
// reasoning_effort. An explicit effort wins over a thinking budget;
// adaptive thinking leaves the amount to the model (and the effort).
func messagesEffort(in *anthropic.Request, d *drops) (string, error) {
	effort, disabled := "", false
	if th := in.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			switch {
			case th.BudgetTokens < 4096:
				effort = "low"
			case th.BudgetTokens < 16384:
				effort = "medium"
			default:
				effort = "high"
			}
		case "adaptive":
		case "disabled":
			disabled = true
		default:
			return "", fieldErr("thinking.type", "unknown value %q", th.Type)
		}
		if th.Display != "" {
			d.add("thinking.display") // whether thinking text is shown: presentation only
		}
	}
	oc := in.OutputConfig
	if oc == nil || oc.Effort == "" {
		return effort, nil
	}
	switch oc.Effort {
	case "low", "medium", "high", "xhigh":
		effort = oc.Effort
	case "max":
		effort = "xhigh" // the highest the internal form names
	default:
		return "", fieldErr("output_config.effort", "unknown value %q", oc.Effort)
	}
	if disabled {
		// Without thinking the effort only tunes how terse the answer
		// is; as reasoning_effort it would turn reasoning on.
		d.add("output_config.effort")
		return "", nil
	}
	return effort, nil
}

// messagesFormat maps a structured output format to response_format.
func messagesFormat(in *anthropic.Request, out *openai.ChatRequest) error {
	f, field := in.OutputFormat, "output_format"
	if in.OutputConfig != nil && in.OutputConfig.Format != nil {
		f, field = in.OutputConfig.Format, "output_config.format"
	}
	if f == nil {
		return nil
	}
	if f.Type != "json_schema" {
		return fieldErr(field+".type", `must be "json_schema"`)
	}
	if !present(f.Schema) {
		return fieldErr(field+".schema", "required")
	}
	out.ResponseFormat = &openai.ResponseFormat{Type: "json_schema",
		JSONSchema: &openai.JSONSchema{Name: "output", Schema: f.Schema, Strict: ptr(true)}}
	return nil
}

func chatTools(in *anthropic.Request, out *openai.ChatRequest, d *drops) error {
	for i, t := range in.Tools {
		f := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type == "" || t.Type == "custom":
		case strings.HasPrefix(t.Type, "tool_search_tool_"):
			// Deferred tools are all sent up front: nothing is left to
			// search for.
			d.add(f)
			continue
		default:
			return fieldErr(f+".type", "server tool %q runs only on anthropic providers", t.Type)
		}
		d.addRaw(f+".cache_control", t.CacheControl)
		if t.DeferLoading != nil {
			d.add(f + ".defer_loading")
		}
		d.addRaw(f+".input_examples", t.InputExamples)
		d.addRaw(f+".allowed_callers", t.AllowedCallers)
		if t.EagerInputStreaming != nil {
			d.add(f + ".eager_input_streaming")
		}
		schema := t.InputSchema
		if !present(schema) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, openai.Tool{Type: "function",
			Function: &openai.Function{Name: t.Name, Description: t.Description, Parameters: schema, Strict: t.Strict}})
	}
	tc := in.ToolChoice
	if tc == nil {
		return nil
	}
	switch tc.Type {
	case "auto":
		out.ToolChoice = marshal("auto")
	case "any":
		out.ToolChoice = marshal("required")
	case "none":
		out.ToolChoice = marshal("none")
	case "tool":
		o := openai.ToolChoiceObject{Type: "function"}
		o.Function.Name = tc.Name
		out.ToolChoice = marshal(o)
	default:
		return fieldErr("tool_choice.type", "unknown value %q", tc.Type)
	}
	if tc.DisableParallelToolUse {
		out.ParallelToolCalls = ptr(false)
	}
	return nil
}

// systemText joins a system prompt's text blocks (a string or an array
// of blocks) with a blank line.
func systemText(raw json.RawMessage, field string, d *drops) (string, error) {
	if !present(raw) {
		return "", nil
	}
	blocks, err := blocksOf(raw, field)
	if err != nil {
		return "", fieldErr(field, "must be a string or an array of text blocks")
	}
	return joinText(blocks, field, d)
}

func joinText(blocks []anthropic.Block, field string, d *drops) (string, error) {
	texts := make([]string, 0, len(blocks))
	for i, b := range blocks {
		f := fmt.Sprintf("%s[%d]", field, i)
		if b.Type != "text" {
			return "", fieldErr(f+".type", "only text blocks are allowed")
		}
		d.addRaw(f+".cache_control", b.CacheControl)
		texts = append(texts, b.Text)
	}
	return strings.Join(texts, "\n\n"), nil
}

func blocksOf(raw json.RawMessage, field string) ([]anthropic.Block, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fieldErr(field, "invalid string")
		}
		return []anthropic.Block{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropic.Block
	if err := json.Unmarshal(raw, &blocks); err == nil {
		return blocks, nil
	}
	// Name the block that failed: often one whose fields differ from
	// the blocks known here (search_result's source is a string).
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fieldErr(field, "must be a string or an array of content blocks")
	}
	for i, it := range items {
		var b anthropic.Block
		if json.Unmarshal(it, &b) == nil {
			continue
		}
		var t struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(it, &t)
		return nil, fieldErr(fmt.Sprintf("%s[%d]", field, i), "block type %q cannot be translated", t.Type)
	}
	return nil, fieldErr(field, "must be a string or an array of content blocks")
}

// chatMessages maps one Anthropic turn. A user turn's tool_result blocks
// become tool messages placed first, since they answer the preceding
// assistant turn; the rest of the turn follows as a user message, led by
// any images the tool results held (OpenAI tool messages carry text
// only). A system turn (a per-turn instruction) stays a system message in
// its place.
func chatMessages(m anthropic.Message, field string, d *drops) ([]openai.Message, error) {
	blocks, err := blocksOf(m.Content, field+".content")
	if err != nil {
		return nil, err
	}
	switch m.Role {
	case "system":
		text, err := joinText(blocks, field+".content", d)
		if err != nil {
			return nil, err
		}
		return []openai.Message{{Role: "system", Content: marshal(text)}}, nil
	case "user":
		var tools []openai.Message
		var moved, parts []openai.ContentPart
		for j, b := range blocks {
			f := fmt.Sprintf("%s.content[%d]", field, j)
			d.addRaw(f+".cache_control", b.CacheControl)
			if b.Type == "tool_result" {
				text, media, err := toolResult(b, f, d)
				if err != nil {
					return nil, err
				}
				tools = append(tools, openai.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: marshal(text)})
				if len(media) > 0 {
					moved = append(moved, openai.ContentPart{Type: "text", Text: "Attached to the result of tool call " + b.ToolUseID + ":"})
					moved = append(moved, media...)
				}
				continue
			}
			p, err := chatPart(b, f, d)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		}
		parts = append(moved, parts...)
		if len(parts) == 0 {
			return tools, nil
		}
		msg := openai.Message{Role: "user", Content: marshal(parts)}
		if len(parts) == 1 && parts[0].Type == "text" {
			msg.Content = marshal(parts[0].Text)
		}
		return append(tools, msg), nil
	case "assistant":
		msg := openai.Message{Role: "assistant"}
		var text strings.Builder
		for j, b := range blocks {
			f := fmt.Sprintf("%s.content[%d]", field, j)
			d.addRaw(f+".cache_control", b.CacheControl)
			switch b.Type {
			case "text":
				d.addRaw(f+".citations", b.Citations)
				text.WriteString(b.Text)
			case "thinking", "redacted_thinking":
				// Signed for Anthropic only, and some OpenAI-compatible
				// servers refuse reasoning in input messages.
				d.add(f)
			case "tool_use":
				msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: b.ID, Type: "function",
					Function: openai.FunctionCall{Name: b.Name, Arguments: compactJSON(b.Input)}})
			default:
				return nil, fieldErr(f+".type", "assistant block type %q cannot be translated", b.Type)
			}
		}
		if text.Len() > 0 || len(msg.ToolCalls) == 0 {
			msg.Content = marshal(text.String())
		}
		return []openai.Message{msg}, nil
	}
	return nil, fieldErr(field+".role", `must be "user", "assistant" or "system"`)
}

func chatPart(b anthropic.Block, field string, d *drops) (openai.ContentPart, error) {
	switch b.Type {
	case "text":
		d.addRaw(field+".citations", b.Citations)
		return openai.ContentPart{Type: "text", Text: b.Text}, nil
	case "image":
		if b.Source == nil {
			return openai.ContentPart{}, fieldErr(field+".source", "required")
		}
		switch b.Source.Type {
		case "base64":
			return openai.ContentPart{Type: "image_url", ImageURL: &openai.ImageURL{URL: "data:" + b.Source.MediaType + ";base64," + b.Source.Data}}, nil
		case "url":
			return openai.ContentPart{Type: "image_url", ImageURL: &openai.ImageURL{URL: b.Source.URL}}, nil
		}
		return openai.ContentPart{}, fieldErr(field+".source.type", "image source %q cannot be translated (file ids exist only at anthropic)", b.Source.Type)
	case "document":
		return chatDocument(b, field, d)
	}
	return openai.ContentPart{}, fieldErr(field+".type", "user block type %q cannot be translated", b.Type)
}

func chatDocument(b anthropic.Block, field string, d *drops) (openai.ContentPart, error) {
	d.addRaw(field+".citations", b.Citations) // the answer comes without citations
	if b.Context != "" {
		d.add(field + ".context")
	}
	if b.Source == nil {
		return openai.ContentPart{}, fieldErr(field+".source", "required")
	}
	switch b.Source.Type {
	case "base64":
		name := b.Title
		if name == "" {
			name = "document.pdf"
		}
		return openai.ContentPart{Type: "file", File: &openai.File{
			FileData: "data:" + b.Source.MediaType + ";base64," + b.Source.Data, Filename: name}}, nil
	case "text", "content":
		if b.Title != "" {
			d.add(field + ".title")
		}
		if b.Source.Type == "text" {
			return openai.ContentPart{Type: "text", Text: b.Source.Data}, nil
		}
		blocks, err := blocksOf(b.Source.Content, field+".source.content")
		if err != nil {
			return openai.ContentPart{}, err
		}
		text, err := joinText(blocks, field+".source.content", d)
		if err != nil {
			return openai.ContentPart{}, err
		}
		return openai.ContentPart{Type: "text", Text: text}, nil
	}
	return openai.ContentPart{}, fieldErr(field+".source.type", "document source %q cannot be translated; send base64, text or content", b.Source.Type)
}

// toolResult flattens a tool_result to the text an OpenAI tool message
// holds; images and PDF documents come back as media for the user
// message that follows. is_error has no OpenAI field: it is kept as a
// leading "Error: " so the model still sees that the call failed. A
// tool_reference (a deferred tool a tool search loaded; every tool is
// sent up front here) becomes a line naming the tool.
func toolResult(b anthropic.Block, field string, d *drops) (string, []openai.ContentPart, error) {
	var text []string
	var media []openai.ContentPart
	if c := b.Content; present(c) {
		blocks, err := blocksOf(c, field+".content")
		if err != nil {
			return "", nil, err
		}
		for k, cb := range blocks {
			f := fmt.Sprintf("%s.content[%d]", field, k)
			d.addRaw(f+".cache_control", cb.CacheControl)
			switch cb.Type {
			case "text":
				text = append(text, cb.Text)
			case "image", "document":
				p, err := chatPart(cb, f, d)
				if err != nil {
					return "", nil, err
				}
				if p.Type == "text" {
					text = append(text, p.Text)
				} else {
					media = append(media, p)
				}
			case "tool_reference":
				text = append(text, "Loaded tool: "+cb.ToolName)
			default:
				return "", nil, fieldErr(f+".type", "tool result block type %q cannot be translated", cb.Type)
			}
		}
	}
	s := strings.Join(text, "\n")
	if b.IsError {
		s = "Error: " + s
	}
	return s, media, nil
}

// stopReason maps finish_reason to stop_reason.
func stopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

func anthropicUsageOf(u Usage) anthropic.Usage {
	in := u.Input - u.CacheRead - u.CacheWrite
	if in < 0 {
		in = 0
	}
	out := anthropic.Usage{InputTokens: in, CacheReadInputTokens: u.CacheRead, CacheCreationInputTokens: u.CacheWrite, OutputTokens: u.Output}
	if u.Reasoning > 0 {
		out.OutputTokensDetails = &anthropic.OutputTokensDetails{ThinkingTokens: u.Reasoning}
	}
	return out
}

func messageID(chatID string) string {
	if chatID == "" {
		return newID("msg_")
	}
	if strings.HasPrefix(chatID, "msg_") {
		return chatID
	}
	return "msg_" + strings.TrimPrefix(chatID, "chatcmpl-")
}

// ChatToMessages translates an OpenAI chat.completion into an Anthropic
// message answering clientModel, with its usage.
func ChatToMessages(chatResp []byte, clientModel string) ([]byte, Usage, error) {
	var c openai.ChatCompletion
	if err := json.Unmarshal(chatResp, &c); err != nil {
		return nil, Usage{}, &ProtocolError{Msg: "answer is not a chat.completion"}
	}
	u := usageFromOpenAI(c.Usage)
	r := anthropic.Response{ID: messageID(c.ID), Type: "message", Role: "assistant", Model: clientModel,
		Content: []json.RawMessage{}, Usage: anthropicUsageOf(u)}
	finish := "stop"
	if len(c.Choices) > 0 {
		ch := c.Choices[0]
		finish = ch.FinishReason
		m := ch.Message
		if th := m.ReasoningContent + m.Reasoning; th != "" {
			r.Content = append(r.Content, marshal(anthropic.ThinkingBlock{Type: "thinking", Thinking: th}))
		}
		if m.Content != nil && *m.Content != "" {
			r.Content = append(r.Content, marshal(anthropic.TextBlock{Type: "text", Text: *m.Content}))
		}
		for _, tc := range m.ToolCalls {
			input, err := jsonObject(tc.Function.Arguments, "")
			if err != nil {
				input = json.RawMessage("{}") // a model's malformed arguments: nothing to recover
			}
			r.Content = append(r.Content, marshal(anthropic.ToolUseBlock{Type: "tool_use", ID: anthropicToolID(tc.ID), Name: tc.Function.Name, Input: input}))
		}
	}
	r.StopReason = ptr(stopReason(finish))
	return marshal(r), u, nil
}

// Event is one Anthropic stream event: the SSE event name and its data.
type Event struct {
	Name string
	Data []byte
}

// MessagesStream translates an OpenAI chunk stream into Anthropic's event
// sequence: message_start, then per content block content_block_start,
// content_block_delta..., content_block_stop, then message_delta (stop
// reason and usage) and message_stop. One value serves one stream.
type MessagesStream struct {
	model    string
	id       string
	started  bool
	finished bool
	open     int    // index of the open block, -1 when none
	kind     string // kind of the open block: text | thinking | tool_use
	next     int    // index of the next block
	tools    map[int]int
	stop     string
	usage    Usage
}

// NewMessagesStream starts a translation answering clientModel.
func NewMessagesStream(clientModel string) *MessagesStream {
	return &MessagesStream{model: clientModel, open: -1, tools: map[int]int{}}
}

// Usage is the token count reported so far.
func (s *MessagesStream) Usage() Usage { return s.usage }

func (s *MessagesStream) ev(name string, v any) Event { return Event{Name: name, Data: marshal(v)} }

func (s *MessagesStream) start(out []Event, chatID string) []Event {
	if s.started {
		return out
	}
	s.started = true
	s.id = messageID(chatID)
	return append(out, s.ev(anthropic.EventMessageStart, anthropic.MessageStartEvent{Type: anthropic.EventMessageStart,
		Message: anthropic.Response{ID: s.id, Type: "message", Role: "assistant", Content: []json.RawMessage{}, Model: s.model}}))
}

func (s *MessagesStream) closeBlock(out []Event) []Event {
	if s.open < 0 {
		return out
	}
	out = append(out, s.ev(anthropic.EventContentBlockStop, anthropic.ContentBlockStopEvent{Type: anthropic.EventContentBlockStop, Index: s.open}))
	s.open, s.kind = -1, ""
	return out
}

func (s *MessagesStream) openBlock(out []Event, kind string, block any) []Event {
	out = s.closeBlock(out)
	s.open, s.kind = s.next, kind
	s.next++
	return append(out, s.ev(anthropic.EventContentBlockStart, anthropic.ContentBlockStartEvent{Type: anthropic.EventContentBlockStart, Index: s.open, ContentBlock: block}))
}

func (s *MessagesStream) delta(out []Event, index int, d any) []Event {
	return append(out, s.ev(anthropic.EventContentBlockDelta, anthropic.ContentBlockDeltaEvent{Type: anthropic.EventContentBlockDelta, Index: index, Delta: d}))
}

// Chunk translates one OpenAI chunk (an SSE event's data). "[DONE]" is
// the same as Finish. A chunk carrying an error object becomes an
// Anthropic error event and ends the stream.
func (s *MessagesStream) Chunk(data []byte) ([]Event, error) {
	c, evs, ok, err := nextChunk(s, s.finished, data)
	if !ok {
		return evs, err
	}
	out := s.start(nil, c.ID)
	if c.Usage != nil {
		s.usage = usageFromOpenAI(c.Usage)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // Anthropic has one answer per message
		}
		d := ch.Delta
		if th := strOr(d.ReasoningContent) + strOr(d.Reasoning); th != "" {
			if s.kind != "thinking" {
				out = s.openBlock(out, "thinking", anthropic.ThinkingBlock{Type: "thinking"})
			}
			out = s.delta(out, s.open, anthropic.ThinkingDelta{Type: "thinking_delta", Thinking: th})
		}
		if t := strOr(d.Content); t != "" {
			if s.kind != "text" {
				out = s.openBlock(out, "text", anthropic.TextBlock{Type: "text"})
			}
			out = s.delta(out, s.open, anthropic.TextDelta{Type: "text_delta", Text: t})
		}
		for _, tc := range d.ToolCalls {
			block, seen := s.tools[tc.Index]
			if !seen {
				id := anthropicToolID(tc.ID)
				if tc.ID == "" {
					id = newID("toolu_")
				}
				out = s.openBlock(out, "tool_use", anthropic.ToolUseBlock{Type: "tool_use", ID: id, Name: tc.Function.Name, Input: json.RawMessage("{}")})
				block = s.open
				s.tools[tc.Index] = block
			}
			if a := strOr(tc.Function.Arguments); a != "" {
				out = s.delta(out, block, anthropic.InputJSONDelta{Type: "input_json_delta", PartialJSON: a})
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.stop = stopReason(*ch.FinishReason)
			out = s.closeBlock(out)
		}
	}
	return out, nil
}

// Finish ends the message: closes the open block and emits message_delta
// and message_stop unless the stream already ended.
func (s *MessagesStream) Finish() []Event {
	if s.finished {
		return nil
	}
	s.finished = true
	out := s.start(nil, "")
	out = s.closeBlock(out)
	stop := s.stop
	if stop == "" {
		stop = "end_turn"
	}
	out = append(out, s.ev(anthropic.EventMessageDelta, anthropic.MessageDeltaEvent{Type: anthropic.EventMessageDelta,
		Delta: anthropic.MessageDelta{StopReason: &stop}, Usage: anthropicUsageOf(s.usage)}))
	return append(out, s.ev(anthropic.EventMessageStop, anthropic.TypeOnly{Type: anthropic.EventMessageStop}))
}

// Fail implements ClientStream: Anthropic ends a failed stream with an
// error event.
func (s *MessagesStream) Fail(status int, body []byte) []Event {
	if s.finished {
		return nil
	}
	s.finished = true
	return []Event{{Name: anthropic.EventError, Data: ErrorToAnthropic(status, body)}}
}

func strOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// MessagesTokenCount is a /v1/messages/count_tokens answer.
func MessagesTokenCount(n int64) []byte {
	return marshal(anthropic.CountTokensResponse{InputTokens: n})
}

// ErrorToAnthropic rewrites an error answer (normally OpenAI-shaped) into
// Anthropic's shape, the type chosen by status. A body already in
// Anthropic's shape (an Anthropic upstream's own error) is returned as is.
func ErrorToAnthropic(status int, openaiErrBody []byte) []byte {
	var a anthropic.ErrorResponse
	if json.Unmarshal(openaiErrBody, &a) == nil && a.Type == "error" && a.Error.Type != "" {
		return openaiErrBody
	}
	msg := errorMessage(openaiErrBody)
	if msg == "" {
		msg = http.StatusText(status)
	}
	return marshal(anthropic.ErrorResponse{Type: "error", Error: anthropic.ErrorBody{Type: AnthropicErrors.For(status), Message: msg}})
}
