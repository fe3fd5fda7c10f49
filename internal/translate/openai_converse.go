package translate

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"switchboard/internal/api/converse"
	"switchboard/internal/api/openai"
)

// converseFields is what OpenAIConverse does with each request field.
var converseFields = map[string]fieldRule{
	"model": mapped, "messages": mapped, "max_tokens": mapped, "max_completion_tokens": mapped,
	"temperature": mapped, "top_p": mapped, "top_k": mapped, "stop": mapped, "stream": mapped,
	"stream_options": mapped, "tools": mapped, "tool_choice": mapped, "parallel_tool_calls": mapped,
	"reasoning_effort": mapped, "n": mapped, "response_format": mapped, "presence_penalty": mapped,
	"frequency_penalty": mapped, "logprobs": mapped, "logit_bias": mapped, "modalities": mapped,
	"user": dropped, "seed": dropped, "store": dropped, "metadata": dropped, "service_tier": dropped,
	"prompt_cache_key": dropped, "safety_identifier": dropped, "prediction": dropped,
}

// OpenAIConverse translates one OpenAI chat request for Amazon Bedrock's
// Converse API (any Bedrock model) and the answer back, streams included.
type OpenAIConverse struct {
	// Created stamps answers (unix seconds); ID names them (Converse
	// answers carry no id). Both are set by NewOpenAIConverse.
	Created int64
	ID      string

	chatOut
}

// NewOpenAIConverse translates an OpenAI chat request whose "model" is
// the Bedrock model id. A *FieldError refuses it.
func NewOpenAIConverse(chatReq []byte) (*OpenAIConverse, error) {
	var d drops
	in, err := readChat(chatReq, converseFields, "bedrock converse", &d)
	if err != nil {
		return nil, err
	}
	out, err := converseRequest(in, chatReq)
	if err != nil {
		return nil, err
	}
	return &OpenAIConverse{Created: time.Now().Unix(), ID: newID("chatcmpl-"), chatOut: newChatOut(in, out, &d)}, nil
}

// bedrockAnthropic: a Bedrock model id (or inference profile) of Claude,
// whose model-specific fields are Anthropic's.
func bedrockAnthropic(model string) bool { return strings.Contains(model, "anthropic.") }

func converseRequest(in *openai.ChatRequest, raw []byte) (*converse.Request, error) {
	out := &converse.Request{}
	ic := &converse.InferenceConfig{Temperature: in.Temperature, TopP: in.TopP}
	switch {
	case in.MaxCompletionTokens != nil:
		ic.MaxTokens = in.MaxCompletionTokens
	case in.MaxTokens != nil:
		ic.MaxTokens = in.MaxTokens
	}
	if ic.MaxTokens != nil && *ic.MaxTokens < 1 {
		return nil, fieldErr("max_tokens", "must be at least 1")
	}
	claude := bedrockAnthropic(in.Model)
	extra := map[string]any{}
	if in.TopK != nil {
		if !claude {
			return nil, fieldErr("top_k", "bedrock converse passes top_k to Anthropic models only")
		}
		extra["top_k"] = *in.TopK
	}
	switch {
	case in.N != nil && *in.N != 1:
		return nil, fieldErr("n", "bedrock converse returns one choice per request")
	case in.PresencePenalty != nil && *in.PresencePenalty != 0:
		return nil, fieldErr("presence_penalty", "not supported by bedrock converse")
	case in.FrequencyPenalty != nil && *in.FrequencyPenalty != 0:
		return nil, fieldErr("frequency_penalty", "not supported by bedrock converse")
	case in.Logprobs != nil && *in.Logprobs:
		return nil, fieldErr("logprobs", "not supported by bedrock converse")
	case len(in.LogitBias) > 0:
		return nil, fieldErr("logit_bias", "not supported by bedrock converse")
	}
	if err := textModalities(raw); err != nil {
		return nil, err
	}
	if rf := in.ResponseFormat; rf != nil && rf.Type != "" && rf.Type != "text" {
		return nil, fieldErr("response_format", "type %q is not supported by bedrock converse", rf.Type)
	}
	stops, err := stopList(in.Stop)
	if err != nil {
		return nil, err
	}
	ic.StopSequences = stops
	switch in.ReasoningEffort {
	case "", "none", "minimal":
	default:
		budget, ok := anthropicThinkingBudget[in.ReasoningEffort]
		switch {
		case !ok:
			return nil, fieldErr("reasoning_effort", "unknown value %q", in.ReasoningEffort)
		case !claude:
			return nil, fieldErr("reasoning_effort", "bedrock converse passes a reasoning budget to Anthropic models only")
		case ic.MaxTokens == nil:
			ic.MaxTokens = ptr(int64(DefaultAnthropicMaxTokens))
		}
		if *ic.MaxTokens <= budget {
			return nil, fieldErr("reasoning_effort", "needs max_tokens above %d for the thinking budget", budget)
		}
		extra["thinking"] = map[string]any{"type": "enabled", "budget_tokens": budget}
	}
	if ic.MaxTokens != nil || ic.Temperature != nil || ic.TopP != nil || len(ic.StopSequences) > 0 {
		out.InferenceConfig = ic
	}
	if len(extra) > 0 {
		out.AdditionalModelRequestFields = extra
	}
	if err := converseMessages(in.Messages, out); err != nil {
		return nil, err
	}
	if err := converseTools(in, out); err != nil {
		return nil, err
	}
	return out, nil
}

func converseTools(in *openai.ChatRequest, out *converse.Request) error {
	var tools []converse.Tool
	for i, t := range in.Tools {
		if t.Type != "function" || t.Function == nil {
			return fieldErr(fmt.Sprintf("tools[%d].type", i), "only function tools are supported")
		}
		schema := json.RawMessage(compactJSON(t.Function.Parameters))
		if string(schema) == "{}" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tools = append(tools, converse.Tool{ToolSpec: converse.ToolSpec{Name: t.Function.Name,
			Description: t.Function.Description, InputSchema: converse.InputSchema{JSON: schema}}})
	}
	mode, name, err := toolChoice(in.ToolChoice)
	if err != nil {
		return err
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls && len(tools) > 0 {
		return fieldErr("parallel_tool_calls", "bedrock converse cannot be limited to one call per turn")
	}
	if len(tools) == 0 {
		return nil
	}
	if mode == "none" {
		// Converse has no "none": without tools the model makes no call,
		// but a conversation holding tool calls needs its tools listed.
		if hasToolBlocks(out.Messages) {
			return fieldErr("tool_choice", `"none" cannot be expressed on bedrock converse while the conversation holds tool calls`)
		}
		return nil
	}
	out.ToolConfig = &converse.ToolConfig{Tools: tools}
	switch mode {
	case "auto":
		out.ToolConfig.ToolChoice = &converse.ToolChoice{Auto: &struct{}{}}
	case "required":
		out.ToolConfig.ToolChoice = &converse.ToolChoice{Any: &struct{}{}}
	case "function":
		out.ToolConfig.ToolChoice = &converse.ToolChoice{Tool: &converse.ToolChoiceOf{Name: name}}
	}
	return nil
}

func hasToolBlocks(msgs []converse.Message) bool {
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.ToolUse != nil || b.ToolResult != nil {
				return true
			}
		}
	}
	return false
}

// converseMessages hoists system messages into system and merges
// consecutive turns of one role (tool results are user turns).
func converseMessages(msgs []openai.Message, out *converse.Request) error {
	add := func(role string, blocks []converse.Block) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
			out.Messages[n-1].Content = append(out.Messages[n-1].Content, blocks...)
			return
		}
		out.Messages = append(out.Messages, converse.Message{Role: role, Content: blocks})
	}
	docs := 0
	for i, m := range msgs {
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			s, err := messageText(m, field)
			if err != nil {
				return err
			}
			if s != "" {
				out.System = append(out.System, converse.SystemBlock{Text: s})
			}
		case "user":
			parts, err := contentParts(m.Content, field+".content")
			if err != nil {
				return err
			}
			var blocks []converse.Block
			for j, p := range parts {
				b, err := conversePart(p, fmt.Sprintf("%s.content[%d]", field, j), &docs)
				if err != nil {
					return err
				}
				if b != nil {
					blocks = append(blocks, *b)
				}
			}
			add("user", blocks)
		case "assistant":
			blocks, err := converseAssistant(m, field)
			if err != nil {
				return err
			}
			add("assistant", blocks)
		case "tool":
			if m.ToolCallID == "" {
				return fieldErr(field+".tool_call_id", "required for tool messages")
			}
			content, err := converseToolResult(m.Content, field+".content")
			if err != nil {
				return err
			}
			add("user", []converse.Block{{ToolResult: &converse.ToolResult{ToolUseID: converseToolID(m.ToolCallID), Content: content}}})
		case "function":
			return fieldErr(field+".role", `legacy "function" messages are not supported; use tools`)
		default:
			return fieldErr(field+".role", "unknown role %q", m.Role)
		}
	}
	if len(out.Messages) == 0 {
		return fieldErr("messages", "needs at least one user or assistant message")
	}
	return nil
}

// converseToolID maps a tool call id onto Converse's [a-zA-Z0-9_-]+, the
// same way for the call and its result (as for Anthropic).
func converseToolID(id string) string { return anthropicToolID(id) }

var converseImageFormats = map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp"}

// conversePart maps one OpenAI content part; nil for empty text.
func conversePart(p openai.ContentPart, field string, docs *int) (*converse.Block, error) {
	switch p.Type {
	case "text":
		if p.Text == "" {
			return nil, nil // Converse rejects blank text blocks
		}
		return &converse.Block{Text: ptr(p.Text)}, nil
	case "image_url":
		if p.ImageURL == nil {
			return nil, fieldErr(field+".image_url", "required")
		}
		img, err := converseImage(p.ImageURL.URL, field+".image_url.url")
		if err != nil {
			return nil, err
		}
		return &converse.Block{Image: img}, nil
	case "file":
		if p.File != nil {
			if mime, data, ok := parseDataURL(p.File.FileData); ok && mime == "application/pdf" {
				*docs++
				return &converse.Block{Document: &converse.Document{Format: "pdf", Name: documentName(p.File.Filename, *docs),
					Source: converse.Source{Bytes: data}}}, nil
			}
		}
		return nil, fieldErr(field+".file", "only PDF files given as base64 file_data are supported by bedrock converse")
	}
	return nil, fieldErr(field+".type", "content part type %q is not supported by bedrock converse", p.Type)
}

func converseImage(u, field string) (*converse.Image, error) {
	mime, data, ok := parseDataURL(u)
	if !ok {
		return nil, fieldErr(field, "bedrock converse takes images as base64 data: URLs only")
	}
	f, ok := converseImageFormats[mime]
	if !ok {
		return nil, fieldErr(field, "image type %q is not one of png, jpeg, gif, webp", mime)
	}
	return &converse.Image{Format: f, Source: converse.Source{Bytes: data}}, nil
}

// documentName keeps what Converse allows in a document name (letters,
// digits, single spaces, hyphens, parentheses, brackets); the document's
// position names it otherwise.
func documentName(filename string, n int) string {
	base, _, _ := strings.Cut(filename, ".")
	var b strings.Builder
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-()[]", r):
			b.WriteRune(r)
		case r == ' ' || r == '_':
			if s := b.String(); s != "" && !strings.HasSuffix(s, " ") {
				b.WriteByte(' ')
			}
		}
	}
	if s := strings.TrimSpace(b.String()); s != "" && len(s) <= 200 {
		return s
	}
	return fmt.Sprintf("document %d", n)
}

func converseAssistant(m openai.Message, field string) ([]converse.Block, error) {
	text, err := messageText(m, field)
	if err != nil {
		return nil, err
	}
	var blocks []converse.Block
	if text != "" {
		blocks = append(blocks, converse.Block{Text: ptr(text)})
	}
	for j, tc := range m.ToolCalls {
		input, err := toolCallInput(tc, fmt.Sprintf("%s.tool_calls[%d]", field, j))
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, converse.Block{ToolUse: &converse.ToolUse{ToolUseID: converseToolID(tc.ID), Name: tc.Function.Name, Input: input}})
	}
	return blocks, nil
}

func converseToolResult(content json.RawMessage, field string) ([]converse.ToolResultContent, error) {
	parts, err := contentParts(content, field)
	if err != nil {
		return nil, err
	}
	out := []converse.ToolResultContent{}
	for j, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, converse.ToolResultContent{Text: ptr(p.Text)})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, fieldErr(fmt.Sprintf("%s[%d].image_url", field, j), "required")
			}
			img, err := converseImage(p.ImageURL.URL, fmt.Sprintf("%s[%d].image_url.url", field, j))
			if err != nil {
				return nil, err
			}
			out = append(out, converse.ToolResultContent{Image: img})
		default:
			return nil, fieldErr(fmt.Sprintf("%s[%d].type", field, j), "content part type %q is not supported in a tool result by bedrock converse", p.Type)
		}
	}
	return out, nil
}

// converseFinish maps stopReason to finish_reason.
func converseFinish(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "guardrail_intervened", "content_filtered":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence
}

func converseUsage(u *converse.Usage) Usage {
	if u == nil {
		return Usage{}
	}
	return Usage{Input: u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens, Output: u.OutputTokens,
		CacheRead: u.CacheReadInputTokens, CacheWrite: u.CacheWriteInputTokens}
}

// Response translates a unary Converse answer into a chat.completion.
func (t *OpenAIConverse) Response(body []byte) ([]byte, Usage, error) {
	var r converse.Response
	if err := json.Unmarshal(body, &r); err != nil || r.Output.Message == nil {
		return nil, Usage{}, &ProtocolError{Msg: "converse answer has no output message"}
	}
	msg := openai.ResponseMessage{Role: "assistant"}
	var text, thinking strings.Builder
	hasText := false
	for _, b := range r.Output.Message.Content {
		switch {
		case b.Text != nil:
			text.WriteString(*b.Text)
			hasText = true
		case b.ReasoningContent != nil && b.ReasoningContent.ReasoningText != nil:
			thinking.WriteString(b.ReasoningContent.ReasoningText.Text)
		case b.ToolUse != nil:
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: b.ToolUse.ToolUseID, Type: "function",
				Function: openai.FunctionCall{Name: b.ToolUse.Name, Arguments: compactJSON(b.ToolUse.Input)}})
		}
	}
	if hasText || len(msg.ToolCalls) == 0 {
		msg.Content = ptr(text.String())
	}
	msg.ReasoningContent = thinking.String()
	u := converseUsage(r.Usage)
	out := openai.ChatCompletion{
		ID: t.ID, Object: "chat.completion", Created: t.Created, Model: t.model,
		Choices: []openai.Choice{{Index: 0, Message: msg, Logprobs: json.RawMessage("null"), FinishReason: converseFinish(r.StopReason)}},
		Usage:   u.OpenAI(),
	}
	return marshal(out), u, nil
}

// Bedrock's error types by the status the gateway gives them: throttling
// and quota errors are rate limits (a pause and a fallback, as a 429),
// whatever status Bedrock sent them with.
var converseErrorStatus = map[string]int{
	"ThrottlingException": http.StatusTooManyRequests, "ServiceQuotaExceededException": http.StatusTooManyRequests,
	"ModelNotReadyException": http.StatusTooManyRequests, "ServiceUnavailableException": http.StatusServiceUnavailable,
	"ModelTimeoutException": http.StatusRequestTimeout, "InternalServerException": http.StatusInternalServerError,
	"ModelStreamErrorException": http.StatusBadGateway, "ValidationException": http.StatusBadRequest,
	"AccessDeniedException": http.StatusForbidden, "ResourceNotFoundException": http.StatusNotFound,
	"UnrecognizedClientException": http.StatusForbidden, "ExpiredTokenException": http.StatusForbidden,
	"InvalidSignatureException": http.StatusForbidden,
}

// BedrockErrorType is an error's type from the X-Amzn-ErrorType header
// ("ThrottlingException:http://internal.amazon.com/...") or the body's
// __type, without namespace.
func BedrockErrorType(header string, body []byte) string {
	typ, _, _ := strings.Cut(header, ":")
	if typ == "" {
		var v struct {
			Type string `json:"__type"`
		}
		_ = json.Unmarshal(body, &v)
		typ = v.Type
		if i := strings.LastIndexByte(typ, '#'); i >= 0 {
			typ = typ[i+1:]
		}
	}
	return strings.TrimSpace(typ)
}

// BedrockErrorStatus is the status the gateway gives a Bedrock error of
// type typ that came with status (exception names in streams start with a
// lower-case letter).
func BedrockErrorStatus(typ string, status int) int {
	if typ != "" {
		if s, ok := converseErrorStatus[strings.ToUpper(typ[:1])+typ[1:]]; ok {
			return s
		}
	}
	return status
}

// BedrockErrorToOpenAI rewrites a Bedrock error answer ({"message": ...})
// of type typ into OpenAI's error shape, the type as its code.
func BedrockErrorToOpenAI(status int, typ string, body []byte) []byte {
	msg := errorMessage(body)
	var v struct {
		Message string `json:"Message"` // some services capitalize it
	}
	if json.Unmarshal(body, &v) == nil && v.Message != "" && msg == strings.TrimSpace(string(body)) {
		msg = v.Message
	}
	if msg == "" {
		msg = fmt.Sprintf("upstream answered %d", status)
	}
	return OpenAIError(status, msg, "", typ)
}

// Stream returns a fresh stream translator for one attempt.
func (t *OpenAIConverse) Stream() *ConverseChatStream {
	return &ConverseChatStream{c: chunker{id: t.ID, model: t.model, created: t.Created, includeUsage: t.includeUsage},
		blocks: map[int]streamBlock{}}
}

// ConverseChatStream translates ConverseStream events (named by their
// :event-type, exceptions by their :exception-type) into OpenAI chunks.
// The stream ends with metadata (usage) after messageStop.
type ConverseChatStream struct {
	c       chunker
	blocks  map[int]streamBlock
	tools   int
	started bool
	stopped bool
	stop    string
	usage   *converse.Usage
}

// Usage implements StreamTranslator.
func (s *ConverseChatStream) Usage() Usage { return converseUsage(s.usage) }

// End implements StreamTranslator: a stream that closes after messageStop
// without its metadata still ends; earlier, it was cut.
func (s *ConverseChatStream) End() ([][]byte, error) {
	if s.stopped {
		return s.c.finish([]finishChoice{{0, converseFinish(s.stop)}}, s.Usage()), nil
	}
	return nil, &ProtocolError{Msg: "converse stream ended before messageStop"}
}

// Event implements StreamTranslator.
func (s *ConverseChatStream) Event(name string, data []byte) ([][]byte, bool, error) {
	var ev converse.StreamEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, false, &ProtocolError{Msg: "converse stream event is not JSON"}
	}
	if strings.HasSuffix(name, "Exception") {
		status := BedrockErrorStatus(name, http.StatusInternalServerError)
		return nil, false, &UpstreamError{Status: status, Body: OpenAIError(status, ev.Message, "", strings.ToUpper(name[:1])+name[1:])}
	}
	var out [][]byte
	if !s.started {
		s.started = true
		out = append(out, s.c.delta(0, openai.Delta{Role: "assistant", Content: ptr("")}))
	}
	switch name {
	case converse.EventContentBlockStart:
		if ev.Start != nil && ev.Start.ToolUse != nil {
			b := streamBlock{kind: "tool_use", tool: s.tools}
			s.tools++
			s.blocks[ev.ContentBlockIndex] = b
			out = append(out, s.c.delta(0, openai.Delta{ToolCalls: []openai.ToolCallDelta{{
				Index: b.tool, ID: ev.Start.ToolUse.ToolUseID, Type: "function", Function: openai.FunctionDelta{Name: ev.Start.ToolUse.Name, Arguments: ptr("")}}}}))
		}
	case converse.EventContentBlockDelta:
		d := ev.Delta
		switch {
		case d == nil:
			return out, false, &ProtocolError{Msg: "contentBlockDelta without delta"}
		case d.Text != nil:
			if *d.Text != "" {
				out = append(out, s.c.delta(0, openai.Delta{Content: d.Text}))
			}
		case d.ReasoningContent != nil:
			if d.ReasoningContent.Text != "" {
				out = append(out, s.c.delta(0, openai.Delta{ReasoningContent: ptr(d.ReasoningContent.Text)}))
			}
		case d.ToolUse != nil:
			if b, ok := s.blocks[ev.ContentBlockIndex]; ok && b.kind == "tool_use" && d.ToolUse.Input != "" {
				b.args = true
				s.blocks[ev.ContentBlockIndex] = b
				out = append(out, s.c.delta(0, openai.Delta{ToolCalls: []openai.ToolCallDelta{{
					Index: b.tool, Function: openai.FunctionDelta{Arguments: ptr(d.ToolUse.Input)}}}}))
			}
		}
	case converse.EventContentBlockStop:
		if b, ok := s.blocks[ev.ContentBlockIndex]; ok && b.kind == "tool_use" && !b.args {
			b.args = true
			s.blocks[ev.ContentBlockIndex] = b
			out = append(out, s.c.delta(0, openai.Delta{ToolCalls: []openai.ToolCallDelta{{
				Index: b.tool, Function: openai.FunctionDelta{Arguments: ptr("{}")}}}}))
		}
	case converse.EventMessageStop:
		s.stopped, s.stop = true, ev.StopReason
	case converse.EventMetadata:
		s.usage = ev.Usage
		if s.stopped {
			return append(out, s.c.finish([]finishChoice{{0, converseFinish(s.stop)}}, s.Usage())...), true, nil
		}
	}
	return out, false, nil
}
