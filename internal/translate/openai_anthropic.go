package translate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"switchboard/internal/api/anthropic"
	"switchboard/internal/api/openai"
)

// DefaultAnthropicMaxTokens is max_tokens when the client gave none:
// Anthropic requires the field, OpenAI does not.
const DefaultAnthropicMaxTokens = 8192

// reasoning_effort -> thinking budget. Small enough to fit under the
// default max_tokens.
var anthropicThinkingBudget = map[string]int64{"low": 1024, "medium": 2048, "high": 4096, "xhigh": 6144}

// anthropicFields is what OpenAIAnthropic does with each request field.
var anthropicFields = map[string]fieldRule{
	"model": mapped, "messages": mapped, "max_tokens": mapped, "max_completion_tokens": mapped,
	"temperature": mapped, "top_p": mapped, "top_k": mapped, "stop": mapped, "stream": mapped,
	"stream_options": mapped, "tools": mapped, "tool_choice": mapped, "parallel_tool_calls": mapped,
	"user": mapped, "reasoning_effort": mapped, "n": mapped, "response_format": mapped,
	"presence_penalty": mapped, "frequency_penalty": mapped, "logprobs": mapped, "thinking": mapped,
	"logit_bias": mapped, "modalities": mapped,
	"seed": dropped, "store": dropped, "metadata": dropped, "service_tier": dropped,
	"prompt_cache_key": dropped, "safety_identifier": dropped, "prediction": dropped,
}

// OpenAIAnthropic translates one OpenAI chat request for an Anthropic
// upstream and the upstream's answer back.
type OpenAIAnthropic struct {
	// Created stamps answers (unix seconds); set by NewOpenAIAnthropic.
	Created int64

	chatOut
}

// NewOpenAIAnthropic translates an OpenAI chat request. A *FieldError
// refuses it.
func NewOpenAIAnthropic(chatReq []byte) (*OpenAIAnthropic, error) {
	var d drops
	in, err := readChat(chatReq, anthropicFields, "anthropic providers", &d)
	if err != nil {
		return nil, err
	}
	out, err := anthropicRequest(in, chatReq)
	if err != nil {
		return nil, err
	}
	return &OpenAIAnthropic{Created: time.Now().Unix(), chatOut: newChatOut(in, out, &d)}, nil
}

func anthropicRequest(in *openai.ChatRequest, raw []byte) (*anthropic.Request, error) {
	out := &anthropic.Request{Model: in.Model, Stream: in.Stream, TopP: in.TopP, TopK: in.TopK}
	switch {
	case in.MaxCompletionTokens != nil:
		out.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		out.MaxTokens = *in.MaxTokens
	default:
		out.MaxTokens = DefaultAnthropicMaxTokens
	}
	if out.MaxTokens < 1 {
		return nil, fieldErr("max_tokens", "must be at least 1")
	}
	if in.Temperature != nil {
		if *in.Temperature > 1 {
			return nil, fieldErr("temperature", "anthropic accepts 0 to 1; %g would change the sampling the client asked for", *in.Temperature)
		}
		out.Temperature = in.Temperature
	}
	if in.N != nil && *in.N != 1 {
		return nil, fieldErr("n", "anthropic returns one choice per request")
	}
	if in.PresencePenalty != nil && *in.PresencePenalty != 0 {
		return nil, fieldErr("presence_penalty", "not supported by anthropic providers")
	}
	if in.FrequencyPenalty != nil && *in.FrequencyPenalty != 0 {
		return nil, fieldErr("frequency_penalty", "not supported by anthropic providers")
	}
	if in.Logprobs != nil && *in.Logprobs {
		return nil, fieldErr("logprobs", "not supported by anthropic providers")
	}
	if len(in.LogitBias) > 0 {
		return nil, fieldErr("logit_bias", "not supported by anthropic providers")
	}
	if err := textModalities(raw); err != nil {
		return nil, err
	}
	if rf := in.ResponseFormat; rf != nil && rf.Type != "" && rf.Type != "text" {
		return nil, fieldErr("response_format", "type %q is not supported by anthropic providers", rf.Type)
	}
	stops, err := stopList(in.Stop)
	if err != nil {
		return nil, err
	}
	out.StopSequences = stops
	if in.User != "" {
		out.Metadata = &anthropic.Metadata{UserID: in.User}
	}
	if err := anthropicThinking(in, raw, out); err != nil {
		return nil, err
	}
	if err := anthropicTools(in, out); err != nil {
		return nil, err
	}
	if err := anthropicMessages(in.Messages, out); err != nil {
		return nil, err
	}
	return out, nil
}

// textModalities refuses output modalities other than text.
func textModalities(raw []byte) error {
	var v struct {
		Modalities []string `json:"modalities"`
	}
	_ = json.Unmarshal(raw, &v)
	for _, m := range v.Modalities {
		if m != "text" {
			return fieldErr("modalities", "only text output is supported by this provider")
		}
	}
	return nil
}

func anthropicThinking(in *openai.ChatRequest, raw []byte, out *anthropic.Request) error {
	// A native "thinking" object (an extension some clients send) wins.
	var v struct {
		Thinking *anthropic.Thinking `json:"thinking"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return fieldErr("thinking", "must be an object")
	}
	if v.Thinking != nil {
		out.Thinking = v.Thinking
		return nil
	}
	switch in.ReasoningEffort {
	case "", "none", "minimal":
		return nil
	}
	budget, ok := anthropicThinkingBudget[in.ReasoningEffort]
	if !ok {
		return fieldErr("reasoning_effort", "unknown value %q", in.ReasoningEffort)
	}
	if out.MaxTokens <= budget {
		return fieldErr("reasoning_effort", "needs max_tokens above %d for anthropic's thinking budget", budget)
	}
	out.Thinking = &anthropic.Thinking{Type: "enabled", BudgetTokens: budget}
	return nil
}

func anthropicTools(in *openai.ChatRequest, out *anthropic.Request) error {
	for i, t := range in.Tools {
		if t.Type != "function" || t.Function == nil {
			return fieldErr(fmt.Sprintf("tools[%d].type", i), "only function tools are supported")
		}
		schema := t.Function.Parameters
		if len(bytes.TrimSpace(schema)) == 0 || bytes.Equal(bytes.TrimSpace(schema), []byte("null")) {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, anthropic.Tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	mode, name, err := toolChoice(in.ToolChoice)
	if err != nil {
		return err
	}
	if len(out.Tools) == 0 {
		// Anthropic refuses tool_choice without tools; without tools
		// any choice means the same: no calls.
		return nil
	}
	switch mode {
	case "auto":
		out.ToolChoice = &anthropic.ToolChoice{Type: "auto"}
	case "required":
		out.ToolChoice = &anthropic.ToolChoice{Type: "any"}
	case "none":
		out.ToolChoice = &anthropic.ToolChoice{Type: "none"}
	case "function":
		out.ToolChoice = &anthropic.ToolChoice{Type: "tool", Name: name}
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls {
		if out.ToolChoice == nil {
			out.ToolChoice = &anthropic.ToolChoice{Type: "auto"}
		}
		if out.ToolChoice.Type != "none" {
			out.ToolChoice.DisableParallelToolUse = true
		}
	}
	return nil
}

// anthropicMessages hoists system messages into system and merges
// consecutive turns of one role (tool results are user turns), as the
// Messages API wants strictly alternating roles.
func anthropicMessages(msgs []openai.Message, out *anthropic.Request) error {
	var system []anthropic.TextBlock
	var turns []struct {
		role   string
		blocks []any
	}
	add := func(role string, blocks []any) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].role == role {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, struct {
			role   string
			blocks []any
		}{role, blocks})
	}
	for i, m := range msgs {
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			s, err := messageText(m, field)
			if err != nil {
				return err
			}
			if s != "" {
				system = append(system, anthropic.TextBlock{Type: "text", Text: s})
			}
		case "user":
			blocks, err := anthropicUserBlocks(m.Content, field+".content")
			if err != nil {
				return err
			}
			add("user", blocks)
		case "assistant":
			blocks, err := anthropicAssistantBlocks(m, field)
			if err != nil {
				return err
			}
			add("assistant", blocks)
		case "tool":
			if m.ToolCallID == "" {
				return fieldErr(field+".tool_call_id", "required for tool messages")
			}
			content, err := anthropicToolResult(m.Content, field+".content")
			if err != nil {
				return err
			}
			add("user", []any{anthropic.ToolResultBlock{Type: "tool_result", ToolUseID: anthropicToolID(m.ToolCallID), Content: content}})
		case "function":
			return fieldErr(field+".role", `legacy "function" messages are not supported; use tools`)
		default:
			return fieldErr(field+".role", "unknown role %q", m.Role)
		}
	}
	if len(system) > 0 {
		out.System = marshal(system)
	}
	if len(turns) == 0 {
		return fieldErr("messages", "needs at least one user or assistant message")
	}
	for _, t := range turns {
		out.Messages = append(out.Messages, anthropic.Message{Role: t.role, Content: marshal(t.blocks)})
	}
	return nil
}

func anthropicUserBlocks(content json.RawMessage, field string) ([]any, error) {
	parts, err := contentParts(content, field)
	if err != nil {
		return nil, err
	}
	var blocks []any
	for j, p := range parts {
		b, err := anthropicPart(p, fmt.Sprintf("%s[%d]", field, j))
		if err != nil {
			return nil, err
		}
		if b != nil {
			blocks = append(blocks, b)
		}
	}
	return blocks, nil
}

// anthropicPart maps one OpenAI content part; nil for empty text.
func anthropicPart(p openai.ContentPart, field string) (any, error) {
	switch p.Type {
	case "text":
		if p.Text == "" {
			return nil, nil // Anthropic rejects empty text blocks
		}
		return anthropic.TextBlock{Type: "text", Text: p.Text}, nil
	case "image_url":
		if p.ImageURL == nil {
			return nil, fieldErr(field+".image_url", "required")
		}
		u := p.ImageURL.URL
		if mime, data, ok := parseDataURL(u); ok {
			return anthropic.ImageBlock{Type: "image", Source: anthropic.Source{Type: "base64", MediaType: mime, Data: data}}, nil
		}
		if isHTTPURL(u) {
			return anthropic.ImageBlock{Type: "image", Source: anthropic.Source{Type: "url", URL: u}}, nil
		}
		return nil, fieldErr(field+".image_url.url", "must be an http(s) URL or a base64 data: URL")
	case "file":
		if p.File != nil {
			if mime, data, ok := parseDataURL(p.File.FileData); ok && mime == "application/pdf" {
				return anthropic.ImageBlock{Type: "document", Source: anthropic.Source{Type: "base64", MediaType: mime, Data: data}}, nil
			}
		}
		return nil, fieldErr(field+".file", "only PDF files given as base64 file_data are supported by anthropic providers")
	}
	return nil, fieldErr(field+".type", "content part type %q is not supported by anthropic providers", p.Type)
}

func anthropicAssistantBlocks(m openai.Message, field string) ([]any, error) {
	text, err := messageText(m, field)
	if err != nil {
		return nil, err
	}
	var blocks []any
	if text != "" {
		blocks = append(blocks, anthropic.TextBlock{Type: "text", Text: text})
	}
	for j, tc := range m.ToolCalls {
		input, err := toolCallInput(tc, fmt.Sprintf("%s.tool_calls[%d]", field, j))
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, anthropic.ToolUseBlock{Type: "tool_use", ID: anthropicToolID(tc.ID), Name: tc.Function.Name, Input: input})
	}
	return blocks, nil
}

// anthropicToolResult keeps a plain string as is, and maps text and image
// parts to blocks.
// anthropicToolID maps a tool call id from another provider (Kimi's
// "functions.get_weather:0", ids with '.', ':' or '/') onto Anthropic's
// ^[a-zA-Z0-9_-]+$, the same way for the call and its result so they stay
// paired. Valid ids pass unchanged.
func anthropicToolID(id string) string {
	ok := id != ""
	for i := 0; i < len(id) && ok; i++ {
		c := id[i]
		ok = c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if ok {
		return id
	}
	b := []byte(id)
	for i, c := range b {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '_'
		}
	}
	// A short digest keeps distinct ids distinct after the replacement.
	h := sha256.Sum256([]byte(id))
	return string(b) + "_" + hex.EncodeToString(h[:4])
}

func anthropicToolResult(content json.RawMessage, field string) (any, error) {
	parts, err := contentParts(content, field)
	if err != nil {
		return nil, err
	}
	if len(parts) == 1 && parts[0].Type == "text" {
		return parts[0].Text, nil
	}
	var blocks []any
	for j, p := range parts {
		b, err := anthropicPart(p, fmt.Sprintf("%s[%d]", field, j))
		if err != nil {
			return nil, err
		}
		if b != nil {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		return "", nil
	}
	return blocks, nil
}

// anthropicFinish maps stop_reason to finish_reason.
func anthropicFinish(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn
}

func anthropicUsage(u anthropic.Usage) Usage {
	out := Usage{
		Input:      u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		Output:     u.OutputTokens,
		CacheRead:  u.CacheReadInputTokens,
		CacheWrite: u.CacheCreationInputTokens,
	}
	if u.OutputTokensDetails != nil {
		out.Reasoning = u.OutputTokensDetails.ThinkingTokens
	}
	return out
}

// Response translates a unary Anthropic message into a chat.completion.
func (t *OpenAIAnthropic) Response(body []byte) ([]byte, Usage, error) {
	var r anthropic.Response
	if err := json.Unmarshal(body, &r); err != nil || r.Type != "message" {
		return nil, Usage{}, &ProtocolError{Msg: "anthropic answer is not a message object"}
	}
	msg := openai.ResponseMessage{Role: "assistant"}
	var text, thinking strings.Builder
	hasText := false
	for _, raw := range r.Content {
		var b anthropic.Block
		if json.Unmarshal(raw, &b) != nil {
			return nil, Usage{}, &ProtocolError{Msg: "anthropic content block is not an object"}
		}
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
			hasText = true
		case "thinking":
			thinking.WriteString(b.Thinking)
		case "tool_use":
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: b.ID, Type: "function",
				Function: openai.FunctionCall{Name: b.Name, Arguments: compactJSON(b.Input)}})
		}
	}
	if hasText || len(msg.ToolCalls) == 0 {
		msg.Content = ptr(text.String())
	}
	msg.ReasoningContent = thinking.String()
	stop := ""
	if r.StopReason != nil {
		stop = *r.StopReason
	}
	u := anthropicUsage(r.Usage)
	model := r.Model
	if model == "" {
		model = t.model
	}
	out := openai.ChatCompletion{
		ID: r.ID, Object: "chat.completion", Created: t.Created, Model: model,
		Choices: []openai.Choice{{Index: 0, Message: msg, Logprobs: json.RawMessage("null"), FinishReason: anthropicFinish(stop)}},
		Usage:   u.OpenAI(),
	}
	return marshal(out), u, nil
}

// anthropicErrorStatus maps an error type to its HTTP status, for errors
// that arrive inside a stream: Anthropic's types, and OpenAI's where they
// differ.
func anthropicErrorStatus(typ string) int {
	switch typ {
	case "rate_limit_exceeded", "insufficient_quota":
		return 429
	case "invalid_request_error":
		return 400
	case "authentication_error":
		return 401
	case "billing_error":
		return 402
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "rate_limit_error":
		return 429
	case "timeout_error":
		return 504
	case "overloaded_error":
		return 529
	}
	return 500
}

// AnthropicErrorToOpenAI rewrites an Anthropic error answer into OpenAI's
// error shape, keeping Anthropic's error type as the type.
func AnthropicErrorToOpenAI(status int, body []byte) []byte {
	var e anthropic.ErrorResponse
	if json.Unmarshal(body, &e) == nil && e.Error.Type != "" {
		b := openai.ErrorResponse{Error: openai.ErrorBody{Message: e.Error.Message, Type: e.Error.Type}}
		if e.Error.Type == "overloaded_error" {
			b.Error.Code = ptr("overloaded")
		}
		return marshal(b)
	}
	msg := errorMessage(body)
	if msg == "" {
		msg = fmt.Sprintf("upstream answered %d", status)
	}
	return OpenAIError(status, msg, "", "")
}

// Error rewrites an Anthropic error answer into OpenAI's shape.
func (t *OpenAIAnthropic) Error(status int, body []byte) []byte {
	return AnthropicErrorToOpenAI(status, body)
}

// Stream returns a fresh stream translator for one attempt.
func (t *OpenAIAnthropic) Stream() *AnthropicChatStream {
	return &AnthropicChatStream{c: chunker{created: t.Created, model: t.model, includeUsage: t.includeUsage}, blocks: map[int]streamBlock{}}
}

type streamBlock struct {
	kind string // text | tool_use | thinking | other
	tool int    // OpenAI tool_calls index for tool_use
	args bool   // some arguments were relayed
}

// AnthropicChatStream translates Anthropic stream events into OpenAI
// chunks. Tool-call arguments are relayed piece by piece as
// input_json_delta events arrive.
type AnthropicChatStream struct {
	c       chunker
	blocks  map[int]streamBlock
	tools   int
	started bool
	stop    string
	usage   anthropic.Usage
}

// Usage implements StreamTranslator.
func (s *AnthropicChatStream) Usage() Usage { return anthropicUsage(s.usage) }

// End implements StreamTranslator: Anthropic ends with message_stop, so an
// earlier close is a cut stream.
func (s *AnthropicChatStream) End() ([][]byte, error) {
	return nil, &ProtocolError{Msg: "anthropic stream ended before message_stop"}
}

// Event implements StreamTranslator.
func (s *AnthropicChatStream) Event(name string, data []byte) ([][]byte, bool, error) {
	var ev anthropic.StreamEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, false, &ProtocolError{Msg: "anthropic stream event is not JSON"}
	}
	typ := ev.Type
	if typ == "" {
		typ = name
	}
	var out [][]byte
	if !s.started && typ != anthropic.EventPing && typ != anthropic.EventError {
		s.started = true
		if ev.Message != nil {
			if ev.Message.ID != "" {
				s.c.id = ev.Message.ID
			}
			if ev.Message.Model != "" {
				s.c.model = ev.Message.Model
			}
			s.usage = ev.Message.Usage
		}
		if s.c.id == "" {
			s.c.id = newID("chatcmpl-")
		}
		out = append(out, s.c.delta(0, openai.Delta{Role: "assistant", Content: ptr("")}))
	}
	switch typ {
	case anthropic.EventError:
		e := anthropic.ErrorResponse{Type: "error"}
		if ev.Error != nil {
			e.Error = *ev.Error
		}
		status := anthropicErrorStatus(e.Error.Type)
		return out, false, &UpstreamError{Status: status, Body: AnthropicErrorToOpenAI(status, marshal(e))}
	case anthropic.EventContentBlockStart:
		if ev.ContentBlock == nil {
			return out, false, &ProtocolError{Msg: "content_block_start without content_block"}
		}
		b := ev.ContentBlock
		switch b.Type {
		case "text":
			s.blocks[ev.Index] = streamBlock{kind: "text"}
			if b.Text != "" {
				out = append(out, s.c.delta(0, openai.Delta{Content: ptr(b.Text)}))
			}
		case "thinking":
			s.blocks[ev.Index] = streamBlock{kind: "thinking"}
			if b.Thinking != "" {
				out = append(out, s.c.delta(0, openai.Delta{ReasoningContent: ptr(b.Thinking)}))
			}
		case "tool_use":
			sb := streamBlock{kind: "tool_use", tool: s.tools}
			s.tools++
			s.blocks[ev.Index] = sb
			args := ""
			if in := compactJSON(b.Input); in != "{}" {
				args = in // a block that arrived whole
				sb.args = true
				s.blocks[ev.Index] = sb
			}
			out = append(out, s.c.delta(0, openai.Delta{ToolCalls: []openai.ToolCallDelta{{
				Index: sb.tool, ID: b.ID, Type: "function", Function: openai.FunctionDelta{Name: b.Name, Arguments: ptr(args)}}}}))
		default:
			s.blocks[ev.Index] = streamBlock{kind: "other"} // server tools, redacted thinking
		}
	case anthropic.EventContentBlockDelta:
		var d anthropic.BlockDelta
		if json.Unmarshal(ev.Delta, &d) != nil {
			return out, false, &ProtocolError{Msg: "content_block_delta without delta"}
		}
		switch d.Type {
		case "text_delta":
			if d.Text != "" {
				out = append(out, s.c.delta(0, openai.Delta{Content: ptr(d.Text)}))
			}
		case "thinking_delta":
			if d.Thinking != "" {
				out = append(out, s.c.delta(0, openai.Delta{ReasoningContent: ptr(d.Thinking)}))
			}
		case "input_json_delta":
			b, ok := s.blocks[ev.Index]
			if ok && b.kind == "tool_use" && d.PartialJSON != "" {
				b.args = true
				s.blocks[ev.Index] = b
				out = append(out, s.c.delta(0, openai.Delta{ToolCalls: []openai.ToolCallDelta{{
					Index: b.tool, Function: openai.FunctionDelta{Arguments: ptr(d.PartialJSON)}}}}))
			}
		}
	case anthropic.EventContentBlockStop:
		// A call without input streams no JSON at all; clients parse the
		// arguments, so they get the empty object.
		if b, ok := s.blocks[ev.Index]; ok && b.kind == "tool_use" && !b.args {
			b.args = true
			s.blocks[ev.Index] = b
			out = append(out, s.c.delta(0, openai.Delta{ToolCalls: []openai.ToolCallDelta{{
				Index: b.tool, Function: openai.FunctionDelta{Arguments: ptr("{}")}}}}))
		}
	case anthropic.EventMessageDelta:
		var d anthropic.MessageDelta
		if json.Unmarshal(ev.Delta, &d) == nil && d.StopReason != nil {
			s.stop = *d.StopReason
		}
		if u := ev.Usage; u != nil {
			// Counts are cumulative; input counts appear here only on
			// some API versions.
			s.usage.OutputTokens = u.OutputTokens
			if u.InputTokens != nil {
				s.usage.InputTokens = *u.InputTokens
			}
			if u.CacheReadInputTokens != nil {
				s.usage.CacheReadInputTokens = *u.CacheReadInputTokens
			}
			if u.CacheCreationInputTokens != nil {
				s.usage.CacheCreationInputTokens = *u.CacheCreationInputTokens
			}
			if u.OutputTokensDetails != nil {
				s.usage.OutputTokensDetails = u.OutputTokensDetails
			}
		}
	case anthropic.EventMessageStop:
		return append(out, s.c.finish([]finishChoice{{0, anthropicFinish(s.stop)}}, s.Usage())...), true, nil
	}
	return out, false, nil
}

// chunker writes OpenAI chunks for one stream.
type chunker struct {
	id, model    string
	created      int64
	includeUsage bool
}

func (c *chunker) chunk(choices []openai.ChunkChoice, u *openai.Usage) []byte {
	if choices == nil {
		choices = []openai.ChunkChoice{}
	}
	return marshal(openai.ChatCompletionChunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created,
		Model: c.model, Choices: choices, Usage: u})
}

func (c *chunker) delta(index int, d openai.Delta) []byte {
	return c.chunk([]openai.ChunkChoice{{Index: index, Delta: d}}, nil)
}

type finishChoice struct {
	index  int
	reason string
}

// finish writes the closing chunks. The last chunk always carries usage so
// the gateway meters every protocol alike: a separate choices-less chunk
// when the client asked for include_usage (OpenAI's own shape), else on
// the finish chunk, which clients that did not ask simply ignore.
func (c *chunker) finish(fs []finishChoice, u Usage) [][]byte {
	var out [][]byte
	for i, f := range fs {
		var usage *openai.Usage
		if !c.includeUsage && i == len(fs)-1 {
			usage = u.OpenAI()
		}
		out = append(out, c.chunk([]openai.ChunkChoice{{Index: f.index, Delta: openai.Delta{}, FinishReason: ptr(f.reason)}}, usage))
	}
	if c.includeUsage || len(fs) == 0 {
		out = append(out, c.chunk(nil, u.OpenAI()))
	}
	return out
}
