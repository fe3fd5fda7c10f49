// Package translate converts between the gateway's internal form (the
// OpenAI Chat Completions wire format) and other LLM protocols. Each
// protocol pair has one file holding its request, response and stream
// translation:
//
//	openai_anthropic.go   internal form -> Anthropic upstream (and back)
//	openai_gemini.go      internal form -> Gemini upstream (and back)
//	openai_converse.go    internal form -> Bedrock Converse upstream (and back)
//	anthropic_openai.go   Anthropic client (/v1/messages) -> internal form (and back)
//	gemini_openai.go      Gemini client (:generateContent) -> internal form (and back)
//	responses_openai.go   OpenAI Responses client -> internal form; its
//	                      answer and event stream in responses_answer.go
//
// policy.go holds what every inbound translation shares: Inbound (the
// internal body and the dropped hints), classify (mapped, dropped and
// refused fields), DroppedHeader, and ClientStream, which every client
// protocol's stream translator implements.
//
// Translators are per-request values. They hold only what the answer side
// needs from the request (model, stream options) and never mutate their
// input, so the attempt loop may run them again on retry. Every response
// translation returns token usage with the bytes, so metering never parses
// an answer twice. What a target cannot express is either dropped, when
// it is a hint that does not change the answer (and reported), or refused
// with a *FieldError (HTTP 400) naming the field; see docs/translation.md.
package translate

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"switchboard/internal/api/openai"
	"switchboard/internal/jsoncheck"
)

// Usage is the token count of one answer, the same for every protocol.
// Input counts every prompt token, cached or not (OpenAI's prompt_tokens);
// CacheRead and CacheWrite are the parts of Input read from and written to
// a prompt cache. Output counts every generated token, Reasoning included.
type Usage struct {
	Input, Output, CacheRead, CacheWrite, Reasoning int64
}

// OpenAI returns the usage in OpenAI's shape, with the cache-write
// extension field when there were cache writes.
func (u Usage) OpenAI() *openai.Usage {
	o := &openai.Usage{
		PromptTokens:             u.Input,
		CompletionTokens:         u.Output,
		TotalTokens:              u.Input + u.Output,
		PromptTokensDetails:      &openai.PromptTokensDetails{CachedTokens: u.CacheRead},
		CacheCreationInputTokens: u.CacheWrite,
	}
	if u.Reasoning > 0 {
		o.CompletionTokensDetails = &openai.CompletionTokensDetails{ReasoningTokens: u.Reasoning}
	}
	return o
}

func usageFromOpenAI(o *openai.Usage) Usage {
	if o == nil {
		return Usage{}
	}
	u := Usage{Input: o.PromptTokens, Output: o.CompletionTokens, CacheWrite: o.CacheCreationInputTokens}
	if o.PromptTokensDetails != nil {
		u.CacheRead = o.PromptTokensDetails.CachedTokens
	}
	if o.CompletionTokensDetails != nil {
		u.Reasoning = o.CompletionTokensDetails.ReasoningTokens
	}
	return u
}

// FieldError refuses a request (HTTP 400) because of one field: the target
// protocol cannot express it, or it is malformed.
type FieldError struct {
	Field string // JSON path, e.g. "messages[2].content[0].input_audio"
	Msg   string
	// Code is the OpenAI error code: "unsupported_parameter" when empty
	// (the target cannot express the field), "invalid_request" for a
	// value of the wrong JSON type.
	Code string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Status is the HTTP status of the refusal.
func (e *FieldError) Status() int { return http.StatusBadRequest }

// OpenAIBody is the refusal in OpenAI's error shape.
func (e *FieldError) OpenAIBody() []byte {
	code := e.Code
	if code == "" {
		code = "unsupported_parameter"
	}
	return OpenAIError(http.StatusBadRequest, e.Error(), e.Field, code)
}

// AnthropicBody is the refusal in Anthropic's error shape.
func (e *FieldError) AnthropicBody() []byte {
	return ErrorToAnthropic(http.StatusBadRequest, e.OpenAIBody())
}

func fieldErr(field, format string, a ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, a...)}
}

// decodeErr refuses a client body that encoding/json could not decode,
// naming the field and the JSON type it needs rather than Go's types.
func decodeErr(err error) *FieldError {
	field, msg, ok := jsoncheck.DecodeError(err)
	if !ok {
		msg = "the request body could not be read"
	}
	if field == "" {
		field = "body"
	}
	return &FieldError{Field: field, Msg: msg, Code: "invalid_request"}
}

// UpstreamError is a failure the upstream reported inside a successful
// answer: an error event in a stream, or a prompt blocked by a safety
// filter. Body is already in OpenAI's error shape; Status is the HTTP
// status the failure would have had as a plain error.
type UpstreamError struct {
	Status int
	Body   []byte
}

func (e *UpstreamError) Error() string {
	return fmt.Sprintf("upstream error %d: %s", e.Status, errorMessage(e.Body))
}

// ProtocolError is an upstream answer that breaks its protocol: a body
// or event that is not the JSON it must be, or a stream cut short.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "upstream protocol: " + e.Msg }

// OpenAIError builds an OpenAI error body. The type follows the status the
// way OpenAI's own API does, so SDKs raise the matching exception.
func OpenAIError(status int, msg, param, code string) []byte {
	b := openai.ErrorResponse{Error: openai.ErrorBody{Message: msg, Type: OpenAIErrors.For(status)}}
	if param != "" {
		b.Error.Param = &param
	}
	if code != "" {
		b.Error.Code = &code
	}
	return marshal(b)
}

// readChat checks an OpenAI chat request's top-level fields against a
// target's rules (a *FieldError refuses it, d collects what is dropped)
// and decodes it.
func readChat(chatReq []byte, rules map[string]fieldRule, target string, d *drops) (*openai.ChatRequest, error) {
	if err := classify(chatReq, rules, nil, target, d); err != nil {
		return nil, err
	}
	var in openai.ChatRequest
	if err := json.Unmarshal(chatReq, &in); err != nil {
		return nil, decodeErr(err)
	}
	return &in, nil
}

// wantsUsage: the client asked for a usage chunk at the end of its stream.
func wantsUsage(in *openai.ChatRequest) bool {
	return in.StreamOptions != nil && in.StreamOptions.IncludeUsage
}

// ErrorTypes names error types by HTTP status in one protocol's
// vocabulary; the 4xx names are common to OpenAI and Anthropic.
type ErrorTypes struct {
	// Server is the type of a 5xx; Overloaded, when set, of 503 and 529;
	// TooLarge, when set, of 413 (else it is an invalid request).
	Server, Overloaded, TooLarge string
}

var (
	// OpenAIErrors is OpenAI's vocabulary, as translated answers use it.
	OpenAIErrors = ErrorTypes{Server: "server_error", Overloaded: "overloaded_error"}
	// AnthropicErrors is Anthropic's.
	AnthropicErrors = ErrorTypes{Server: "api_error", Overloaded: "overloaded_error", TooLarge: "request_too_large"}
)

// For is the error type of status.
func (v ErrorTypes) For(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 413 && v.TooLarge != "":
		return v.TooLarge
	case status == 429:
		return "rate_limit_error"
	case (status == 529 || status == 503) && v.Overloaded != "":
		return v.Overloaded
	case status >= 500:
		return v.Server
	}
	return "invalid_request_error"
}

// errorMessage digs a human message out of an error body of any known shape.
func errorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(v.Error, &inner) == nil && inner.Message != "" {
			return inner.Message
		}
		var s string
		if json.Unmarshal(v.Error, &s) == nil && s != "" {
			return s
		}
		if v.Message != "" {
			return v.Message
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// marshal encodes v compactly without HTML escaping, so text reaches the
// client as the model wrote it. Values here are plain data: encoding
// cannot fail.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("translate: marshal: " + err.Error())
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// parseDataURL splits "data:<mime>;base64,<data>". Only base64 data URLs
// are accepted: every target wants base64.
func parseDataURL(u string) (mime, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mime, enc, _ := strings.Cut(meta, ";")
	if !strings.EqualFold(enc, "base64") || mime == "" {
		return "", "", false
	}
	return strings.ToLower(mime), data, true
}

func isHTTPURL(u string) bool {
	l := strings.ToLower(u)
	return strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://")
}

// contentParts reads an OpenAI content value: a string becomes one text
// part, null or absent none.
func contentParts(raw json.RawMessage, field string) ([]openai.ContentPart, error) {
	return stringOrParts(raw, field, func(s string) openai.ContentPart { return openai.ContentPart{Type: "text", Text: s} })
}

// stringOrParts reads content that is a string (one text part, made by
// text) or an array of parts; null or absent is none.
func stringOrParts[T any](raw json.RawMessage, field string, text func(string) T) ([]T, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fieldErr(field, "invalid string")
		}
		return []T{text(s)}, nil
	}
	var parts []T
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fieldErr(field, "must be a string or an array of content parts")
	}
	return parts, nil
}

// messageText is the text of message m at field (its content: a string
// or text parts, anything else refused), as system messages and
// assistant turns carry it to every target.
func messageText(m openai.Message, field string) (string, error) {
	parts, err := contentParts(m.Content, field+".content")
	if err != nil {
		return "", err
	}
	return textOnly(parts, field+".content")
}

// toolCallInput is a function tool call's arguments as the JSON object
// targets that take structured input want; field names the call.
func toolCallInput(tc openai.ToolCall, field string) (json.RawMessage, error) {
	if tc.Type != "" && tc.Type != "function" {
		return nil, fieldErr(field+".type", "only function tool calls are supported")
	}
	return jsonObject(tc.Function.Arguments, field+".function.arguments")
}

// textOnly joins the text of parts, refusing anything else.
func textOnly(parts []openai.ContentPart, field string) (string, error) {
	var sb strings.Builder
	for i, p := range parts {
		switch p.Type {
		case "text":
			sb.WriteString(p.Text)
		case "refusal":
			sb.WriteString(p.Refusal)
		default:
			return "", fieldErr(fmt.Sprintf("%s[%d]", field, i), "content part type %q is not allowed here (text only)", p.Type)
		}
	}
	return sb.String(), nil
}

// stopList reads stop: a string or an array of strings.
func stopList(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fieldErr("stop", "invalid string")
		}
		return []string{s}, nil
	}
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fieldErr("stop", "must be a string or an array of strings")
	}
	return l, nil
}

// toolChoice reads tool_choice: mode is none|auto|required|function, name
// is set for function.
func toolChoice(raw json.RawMessage) (mode, name string, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", "", nil
	}
	if raw[0] == '"' {
		_ = json.Unmarshal(raw, &mode)
		switch mode {
		case "none", "auto", "required":
			return mode, "", nil
		}
		return "", "", fieldErr("tool_choice", "unknown value %q", mode)
	}
	var o openai.ToolChoiceObject
	if json.Unmarshal(raw, &o) != nil || o.Type != "function" || o.Function.Name == "" {
		return "", "", fieldErr("tool_choice", `must be "none", "auto", "required" or {"type":"function","function":{"name":...}}`)
	}
	return "function", o.Function.Name, nil
}

// jsonObject checks that s is a JSON object ("" counts as {}), as tool
// arguments must be for targets that take them as structured input.
func jsonObject(s, field string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return nil, fieldErr(field, "must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return nil, fieldErr(field, "must be a JSON object")
	}
	return buf.Bytes(), nil
}

// compactJSON returns raw compacted, or "{}" when raw is empty or invalid.
func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if len(bytes.TrimSpace(raw)) == 0 || json.Compact(&buf, raw) != nil {
		return "{}"
	}
	return buf.String()
}

// fieldRule says what a translation does with one top-level request field.
type fieldRule int

const (
	mapped  fieldRule = iota // translated (its own checks refuse what cannot be)
	dropped                  // harmless to drop, documented
)

func ptr[T any](v T) *T { return &v }

// chatOut is what a translation of an OpenAI chat request into another
// protocol carries, the same for every target: the upstream request, the
// model it is for, whether the client asked for a usage chunk, and the
// hints it dropped.
type chatOut struct {
	body         []byte
	model        string
	includeUsage bool
	dropped      []string
}

func newChatOut(in *openai.ChatRequest, out any, d *drops) chatOut {
	return chatOut{body: marshal(out), model: in.Model, includeUsage: wantsUsage(in), dropped: d.list}
}

// Body is the upstream request, in the provider's protocol.
func (t *chatOut) Body() []byte { return t.body }

// Dropped lists the request's top-level hints the translation dropped
// (seed, user, store, ...), for the X-Switchboard-Dropped header.
func (t *chatOut) Dropped() []string { return t.dropped }

// Model is the upstream model (Gemini and Converse take it in the URL).
func (t *chatOut) Model() string { return t.model }
