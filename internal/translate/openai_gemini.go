package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"switchboard/internal/api/gemini"
	"switchboard/internal/api/openai"
)

// reasoning_effort -> thinkingBudget.
var geminiThinkingBudget = map[string]int64{"none": 0, "minimal": 0, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 32768}

// thoughtSep joins a Gemini thought signature to the tool call id handed
// to the client, so that the signature comes back with the call in the
// next request, as Gemini requires for multi-turn function calling.
const thoughtSep = "__thought__"

// A signature is standard base64. It rides in the id in the URL-safe
// alphabet without padding, so that the id stays within what other
// providers accept as a tool call id (Anthropic: ^[a-zA-Z0-9_-]+$) when the
// conversation continues elsewhere, and is restored when it comes back.
var (
	sigToID   = strings.NewReplacer("+", "-", "/", "_")
	sigFromID = strings.NewReplacer("-", "+", "_", "/")
)

func signatureToID(sig string) string { return strings.TrimRight(sigToID.Replace(sig), "=") }

func signatureFromID(s string) string {
	s = sigFromID.Replace(s)
	if n := len(s) % 4; n != 0 {
		s += strings.Repeat("=", 4-n)
	}
	return s
}

// skipSignature is Gemini's documented placeholder for function calls
// that carry no signature (history written by another provider).
const skipSignature = "skip_thought_signature_validator"

var geminiFields = map[string]fieldRule{
	"model": mapped, "messages": mapped, "max_tokens": mapped, "max_completion_tokens": mapped,
	"temperature": mapped, "top_p": mapped, "top_k": mapped, "n": mapped, "stop": mapped, "stream": mapped,
	"stream_options": mapped, "tools": mapped, "tool_choice": mapped, "parallel_tool_calls": mapped,
	"response_format": mapped, "seed": mapped, "presence_penalty": mapped, "frequency_penalty": mapped,
	"reasoning_effort": mapped, "logprobs": mapped, "logit_bias": mapped, "modalities": mapped,
	"user": dropped, "store": dropped, "metadata": dropped, "service_tier": dropped,
	"prompt_cache_key": dropped, "safety_identifier": dropped, "prediction": dropped,
}

// OpenAIGemini translates one OpenAI chat request for a Gemini upstream
// and the upstream's answer back.
type OpenAIGemini struct {
	// Created stamps answers (unix seconds); ID names answers whose
	// upstream gave no responseId and prefixes generated tool call ids.
	// Both are set by NewOpenAIGemini.
	Created int64
	ID      string

	chatOut
}

// NewOpenAIGemini translates an OpenAI chat request. A *FieldError
// refuses it.
func NewOpenAIGemini(chatReq []byte) (*OpenAIGemini, error) {
	var d drops
	in, err := readChat(chatReq, geminiFields, "gemini providers", &d)
	if err != nil {
		return nil, err
	}
	out, err := geminiRequest(in, chatReq)
	if err != nil {
		return nil, err
	}
	return &OpenAIGemini{Created: time.Now().Unix(), ID: newID("chatcmpl-"), chatOut: newChatOut(in, out, &d)}, nil
}

func geminiRequest(in *openai.ChatRequest, raw []byte) (*gemini.Request, error) {
	gc := &gemini.GenerationConfig{Temperature: in.Temperature, TopP: in.TopP, TopK: in.TopK, Seed: in.Seed,
		PresencePenalty: in.PresencePenalty, FrequencyPenalty: in.FrequencyPenalty}
	switch {
	case in.MaxCompletionTokens != nil:
		gc.MaxOutputTokens = in.MaxCompletionTokens
	case in.MaxTokens != nil:
		gc.MaxOutputTokens = in.MaxTokens
	}
	if in.N != nil && *in.N != 1 {
		if *in.N < 1 || *in.N > 8 {
			return nil, fieldErr("n", "gemini accepts 1 to 8 candidates")
		}
		gc.CandidateCount = in.N
	}
	if in.Logprobs != nil && *in.Logprobs {
		return nil, fieldErr("logprobs", "not supported by gemini providers")
	}
	if len(in.LogitBias) > 0 {
		return nil, fieldErr("logit_bias", "not supported by gemini providers")
	}
	if err := textModalities(raw); err != nil {
		return nil, err
	}
	stops, err := stopList(in.Stop)
	if err != nil {
		return nil, err
	}
	if len(stops) > 5 {
		return nil, fieldErr("stop", "gemini accepts at most 5 stop sequences")
	}
	gc.StopSequences = stops
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
		case "json_object":
			gc.ResponseMimeType = "application/json"
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
				return nil, fieldErr("response_format.json_schema.schema", "required")
			}
			gc.ResponseMimeType = "application/json"
			gc.ResponseJSONSchema = rf.JSONSchema.Schema
		default:
			return nil, fieldErr("response_format.type", "unknown value %q", rf.Type)
		}
	}
	if in.ReasoningEffort != "" {
		budget, ok := geminiThinkingBudget[in.ReasoningEffort]
		if !ok {
			return nil, fieldErr("reasoning_effort", "unknown value %q", in.ReasoningEffort)
		}
		gc.ThinkingConfig = &gemini.ThinkingConfig{IncludeThoughts: budget > 0, ThinkingBudget: ptr(budget)}
	}
	out := &gemini.Request{}
	if string(marshal(gc)) != "{}" {
		out.GenerationConfig = gc
	}
	if err := geminiTools(in, out); err != nil {
		return nil, err
	}
	if err := geminiContents(in.Messages, out); err != nil {
		return nil, err
	}
	return out, nil
}

func geminiTools(in *openai.ChatRequest, out *gemini.Request) error {
	var decls []gemini.FunctionDeclaration
	for i, t := range in.Tools {
		if t.Type != "function" || t.Function == nil {
			return fieldErr(fmt.Sprintf("tools[%d].type", i), "only function tools are supported")
		}
		d := gemini.FunctionDeclaration{Name: t.Function.Name, Description: t.Function.Description}
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
			d.ParametersJSONSchema = p
		}
		decls = append(decls, d)
	}
	if len(decls) > 0 {
		out.Tools = []gemini.Tool{{FunctionDeclarations: decls}}
		if in.ParallelToolCalls != nil && !*in.ParallelToolCalls {
			return fieldErr("parallel_tool_calls", "gemini cannot be limited to one call per turn")
		}
	}
	mode, name, err := toolChoice(in.ToolChoice)
	if err != nil {
		return err
	}
	var fc *gemini.FunctionCallingConfig
	switch mode {
	case "auto":
		fc = &gemini.FunctionCallingConfig{Mode: "AUTO"}
	case "required":
		fc = &gemini.FunctionCallingConfig{Mode: "ANY"}
	case "none":
		fc = &gemini.FunctionCallingConfig{Mode: "NONE"}
	case "function":
		fc = &gemini.FunctionCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{name}}
	}
	if fc != nil && len(decls) > 0 {
		out.ToolConfig = &gemini.ToolConfig{FunctionCallingConfig: fc}
	}
	return nil
}

// geminiContents maps messages to contents: system messages to
// systemInstruction, assistant to role model, tool results to
// functionResponse parts of a user turn (named by the call they answer),
// merging consecutive turns of one role.
func geminiContents(msgs []openai.Message, out *gemini.Request) error {
	var system []gemini.Part
	names := map[string]string{} // tool call id -> function name
	add := func(role string, parts []gemini.Part) {
		if len(parts) == 0 {
			return
		}
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
			return
		}
		out.Contents = append(out.Contents, gemini.Content{Role: role, Parts: parts})
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
				system = append(system, gemini.Part{Text: s})
			}
		case "user":
			parts, err := geminiParts(m.Content, field+".content")
			if err != nil {
				return err
			}
			add("user", parts)
		case "assistant":
			text, err := messageText(m, field)
			if err != nil {
				return err
			}
			var gp []gemini.Part
			if text != "" {
				gp = append(gp, gemini.Part{Text: text})
			}
			for j, tc := range m.ToolCalls {
				f := fmt.Sprintf("%s.tool_calls[%d]", field, j)
				args, err := jsonObject(tc.Function.Arguments, f+".function.arguments")
				if err != nil {
					return err
				}
				names[tc.ID] = tc.Function.Name
				p := gemini.Part{FunctionCall: &gemini.FunctionCall{Name: tc.Function.Name, Args: args}}
				if _, sig, ok := strings.Cut(tc.ID, thoughtSep); ok {
					p.ThoughtSignature = signatureFromID(sig)
				} else if j == 0 {
					p.ThoughtSignature = skipSignature
				}
				gp = append(gp, p)
			}
			add("model", gp)
		case "tool":
			name, ok := names[m.ToolCallID]
			if !ok {
				return fieldErr(field+".tool_call_id", "does not answer a tool call of an earlier assistant message (gemini needs the function name)")
			}
			text, err := messageText(m, field)
			if err != nil {
				return err
			}
			add("user", []gemini.Part{{FunctionResponse: &gemini.FunctionResponse{Name: name, Response: geminiToolResponse(text)}}})
		case "function":
			return fieldErr(field+".role", `legacy "function" messages are not supported; use tools`)
		default:
			return fieldErr(field+".role", "unknown role %q", m.Role)
		}
	}
	if len(system) > 0 {
		out.SystemInstruction = &gemini.Content{Parts: system}
	}
	if len(out.Contents) == 0 {
		return fieldErr("messages", "needs at least one user or assistant message")
	}
	return nil
}

// geminiToolResponse wraps a tool result as the object Gemini wants: a
// JSON object result is passed as is, anything else under "content".
func geminiToolResponse(text string) json.RawMessage {
	if obj, err := jsonObject(text, ""); err == nil && strings.TrimSpace(text) != "" {
		return obj
	}
	return marshal(map[string]string{"content": text})
}

func geminiParts(content json.RawMessage, field string) ([]gemini.Part, error) {
	parts, err := contentParts(content, field)
	if err != nil {
		return nil, err
	}
	var out []gemini.Part
	for j, p := range parts {
		f := fmt.Sprintf("%s[%d]", field, j)
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, gemini.Part{Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, fieldErr(f+".image_url", "required")
			}
			u := p.ImageURL.URL
			if mime, data, ok := parseDataURL(u); ok {
				out = append(out, gemini.Part{InlineData: &gemini.Blob{MimeType: mime, Data: data}})
			} else if isHTTPURL(u) {
				out = append(out, gemini.Part{FileData: &gemini.FileData{MimeType: imageMime(u), FileURI: u}})
			} else {
				return nil, fieldErr(f+".image_url.url", "must be an http(s) URL or a base64 data: URL")
			}
		case "input_audio":
			if p.InputAudio == nil || p.InputAudio.Data == "" {
				return nil, fieldErr(f+".input_audio", "required")
			}
			out = append(out, gemini.Part{InlineData: &gemini.Blob{MimeType: "audio/" + p.InputAudio.Format, Data: p.InputAudio.Data}})
		case "file":
			mime, data, ok := "", "", false
			if p.File != nil {
				mime, data, ok = parseDataURL(p.File.FileData)
			}
			if !ok {
				return nil, fieldErr(f+".file", "only files given as base64 file_data are supported by gemini providers")
			}
			out = append(out, gemini.Part{InlineData: &gemini.Blob{MimeType: mime, Data: data}})
		default:
			return nil, fieldErr(f+".type", "content part type %q is not supported by gemini providers", p.Type)
		}
	}
	return out, nil
}

// imageMime guesses an image URL's type from its extension; Gemini wants
// one with fileData.
func imageMime(u string) string {
	p := u
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	switch strings.ToLower(path.Ext(p)) {
	case ".png":
		return "image/png"
	case ".webp":
		return "image/webp"
	case ".gif":
		return "image/gif"
	case ".heic":
		return "image/heic"
	}
	return "image/jpeg"
}

// geminiFinish maps finishReason to finish_reason.
func geminiFinish(reason string, toolCalls bool) string {
	switch reason {
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE":
		return "content_filter"
	}
	if toolCalls {
		return "tool_calls"
	}
	return "stop"
}

func geminiUsage(m *gemini.UsageMetadata) Usage {
	if m == nil {
		return Usage{}
	}
	return Usage{
		Input:     m.PromptTokenCount + m.ToolUsePromptTokenCount,
		Output:    m.CandidatesTokenCount + m.ThoughtsTokenCount,
		CacheRead: m.CachedContentTokenCount,
		Reasoning: m.ThoughtsTokenCount,
	}
}

// geminiBlocked turns a blocked prompt into a clear 400 error.
func geminiBlocked(r *gemini.Response) error {
	if r.PromptFeedback == nil || r.PromptFeedback.BlockReason == "" || len(r.Candidates) > 0 {
		return nil
	}
	msg := "the prompt was blocked by the provider's safety filters (blockReason " + r.PromptFeedback.BlockReason + ")"
	if m := r.PromptFeedback.BlockReasonMessage; m != "" {
		msg += ": " + m
	}
	return &UpstreamError{Status: http.StatusBadRequest, Body: OpenAIError(http.StatusBadRequest, msg, "messages", "content_filter")}
}

// toolCallID names the n-th call of a candidate, carrying the part's
// thought signature.
func (t *OpenAIGemini) toolCallID(p gemini.Part, respID string, cand, n int) string {
	id := p.FunctionCall.ID
	if id == "" {
		base := strings.TrimPrefix(t.ID, "chatcmpl-")
		if respID != "" {
			base = respID
		}
		id = fmt.Sprintf("call_%s_%d_%d", base, cand, n)
	}
	if p.ThoughtSignature != "" {
		id += thoughtSep + signatureToID(p.ThoughtSignature)
	}
	return id
}

// Response translates a unary Gemini answer into a chat.completion. A
// blocked prompt is an *UpstreamError.
func (t *OpenAIGemini) Response(body []byte) ([]byte, Usage, error) {
	var r gemini.Response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, Usage{}, &ProtocolError{Msg: "gemini answer is not a GenerateContentResponse"}
	}
	if err := geminiBlocked(&r); err != nil {
		return nil, Usage{}, err
	}
	if len(r.Candidates) == 0 {
		// Not blocked and yet no answer: relayed, it would be a 200 with
		// "choices":[] that the client counts as served.
		return nil, Usage{}, &ProtocolError{Msg: "gemini answer has no candidates"}
	}
	out := openai.ChatCompletion{ID: t.ID, Object: "chat.completion", Created: t.Created, Model: t.model, Choices: []openai.Choice{}}
	if r.ResponseID != "" {
		out.ID = r.ResponseID
	}
	if r.ModelVersion != "" {
		out.Model = r.ModelVersion
	}
	for _, c := range r.Candidates {
		msg := openai.ResponseMessage{Role: "assistant"}
		var text, thought strings.Builder
		hasText := false
		if c.Content != nil {
			for _, p := range c.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: t.toolCallID(p, r.ResponseID, c.Index, len(msg.ToolCalls)),
						Type: "function", Function: openai.FunctionCall{Name: p.FunctionCall.Name, Arguments: compactJSON(p.FunctionCall.Args)}})
				case p.Thought:
					thought.WriteString(p.Text)
				default:
					text.WriteString(p.Text)
					hasText = hasText || p.Text != ""
				}
			}
		}
		if hasText || len(msg.ToolCalls) == 0 {
			msg.Content = ptr(text.String())
		}
		msg.ReasoningContent = thought.String()
		out.Choices = append(out.Choices, openai.Choice{Index: c.Index, Message: msg, Logprobs: json.RawMessage("null"),
			FinishReason: geminiFinish(c.FinishReason, len(msg.ToolCalls) > 0)})
	}
	u := geminiUsage(r.UsageMetadata)
	out.Usage = u.OpenAI()
	return marshal(out), u, nil
}

// geminiErrorStatus maps a Google RPC status to HTTP, for errors that
// arrive inside a stream.
func geminiErrorStatus(code int, status string) int {
	if code >= 400 && code <= 599 {
		return code
	}
	switch status {
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return 400
	case "UNAUTHENTICATED":
		return 401
	case "PERMISSION_DENIED":
		return 403
	case "NOT_FOUND":
		return 404
	case "RESOURCE_EXHAUSTED":
		return 429
	case "UNAVAILABLE":
		return 503
	case "DEADLINE_EXCEEDED":
		return 504
	}
	return 500
}

// GeminiErrorToOpenAI rewrites a Google error answer into OpenAI's error
// shape; the RPC status (RESOURCE_EXHAUSTED...) becomes the code.
func GeminiErrorToOpenAI(status int, body []byte) []byte {
	var e gemini.ErrorResponse
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return OpenAIError(status, e.Error.Message, "", e.Error.Status)
	}
	var list []gemini.ErrorResponse // some proxies wrap it in an array
	if json.Unmarshal(body, &list) == nil && len(list) > 0 && list[0].Error.Message != "" {
		return OpenAIError(status, list[0].Error.Message, "", list[0].Error.Status)
	}
	msg := errorMessage(body)
	if msg == "" {
		msg = fmt.Sprintf("upstream answered %d", status)
	}
	return OpenAIError(status, msg, "", "")
}

// Error rewrites a Gemini error answer into OpenAI's shape.
func (t *OpenAIGemini) Error(status int, body []byte) []byte {
	return GeminiErrorToOpenAI(status, body)
}

// Stream returns a fresh stream translator for one attempt.
func (t *OpenAIGemini) Stream() *GeminiChatStream {
	return &GeminiChatStream{t: t, c: chunker{id: t.ID, model: t.model, created: t.Created, includeUsage: t.includeUsage},
		cands: map[int]*geminiCand{}}
}

type geminiCand struct {
	tools  int
	finish string
}

// GeminiChatStream translates streamGenerateContent events (each a whole
// GenerateContentResponse) into OpenAI chunks. Gemini ends a stream by
// closing it; the finish chunks are written then, once the last usage is
// known.
type GeminiChatStream struct {
	t       *OpenAIGemini
	c       chunker
	cands   map[int]*geminiCand
	started bool
	usage   Usage
}

// Usage implements StreamTranslator.
func (s *GeminiChatStream) Usage() Usage { return s.usage }

// Event implements StreamTranslator.
func (s *GeminiChatStream) Event(_ string, data []byte) ([][]byte, bool, error) {
	var r gemini.Response
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, false, &ProtocolError{Msg: "gemini stream event is not JSON"}
	}
	var e gemini.ErrorResponse
	if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
		st := geminiErrorStatus(e.Error.Code, e.Error.Status)
		return nil, false, &UpstreamError{Status: st, Body: GeminiErrorToOpenAI(st, data)}
	}
	if err := geminiBlocked(&r); err != nil {
		return nil, false, err
	}
	if r.UsageMetadata != nil {
		s.usage = geminiUsage(r.UsageMetadata)
	}
	if !s.started {
		s.started = true
		if r.ResponseID != "" {
			s.c.id = r.ResponseID
		}
		if r.ModelVersion != "" {
			s.c.model = r.ModelVersion
		}
	}
	var out [][]byte
	for _, c := range r.Candidates {
		st, ok := s.cands[c.Index]
		if !ok {
			st = &geminiCand{}
			s.cands[c.Index] = st
			out = append(out, s.c.delta(c.Index, openai.Delta{Role: "assistant", Content: ptr("")}))
		}
		if c.Content != nil {
			for _, p := range c.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					// Gemini sends each call whole: one chunk with the id,
					// name and complete arguments.
					out = append(out, s.c.delta(c.Index, openai.Delta{ToolCalls: []openai.ToolCallDelta{{
						Index: st.tools, ID: s.t.toolCallID(p, r.ResponseID, c.Index, st.tools), Type: "function",
						Function: openai.FunctionDelta{Name: p.FunctionCall.Name, Arguments: ptr(compactJSON(p.FunctionCall.Args))}}}}))
					st.tools++
				case p.Text == "":
				case p.Thought:
					out = append(out, s.c.delta(c.Index, openai.Delta{ReasoningContent: ptr(p.Text)}))
				default:
					out = append(out, s.c.delta(c.Index, openai.Delta{Content: ptr(p.Text)}))
				}
			}
		}
		if c.FinishReason != "" {
			st.finish = c.FinishReason
		}
	}
	return out, false, nil
}

// End implements StreamTranslator: the close is Gemini's end of stream,
// complete when every candidate reported a finishReason.
func (s *GeminiChatStream) End() ([][]byte, error) {
	if len(s.cands) == 0 {
		return nil, &ProtocolError{Msg: "gemini stream ended without a candidate"}
	}
	idx := make([]int, 0, len(s.cands))
	for i, c := range s.cands {
		if c.finish == "" {
			return nil, &ProtocolError{Msg: "gemini stream ended before finishReason"}
		}
		idx = append(idx, i)
	}
	sort.Ints(idx)
	fs := make([]finishChoice, 0, len(idx))
	for _, i := range idx {
		c := s.cands[i]
		fs = append(fs, finishChoice{i, geminiFinish(c.finish, c.tools > 0)})
	}
	return s.c.finish(fs, s.usage), nil
}
