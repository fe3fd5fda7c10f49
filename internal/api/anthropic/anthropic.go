// Package anthropic holds Anthropic Messages API wire types. Types only:
// translation lives in internal/translate.
package anthropic

import "encoding/json"

// Version is the anthropic-version header value the gateway speaks.
const Version = "2023-06-01"

// Request is POST /v1/messages.
type Request struct {
	Model         string          `json:"model"`
	MaxTokens     int64           `json:"max_tokens"`
	Messages      []Message       `json:"messages"`
	System        json.RawMessage `json:"system,omitempty"` // string or []TextBlock
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	TopK          *int64          `json:"top_k,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
	Tools         []Tool          `json:"tools,omitempty"`
	ToolChoice    *ToolChoice     `json:"tool_choice,omitempty"`
	Thinking      *Thinking       `json:"thinking,omitempty"`
	Metadata      *Metadata       `json:"metadata,omitempty"`
	OutputConfig  *OutputConfig   `json:"output_config,omitempty"`
	// OutputFormat is the deprecated spelling of output_config.format.
	OutputFormat *OutputFormat `json:"output_format,omitempty"`
}

// OutputConfig is output_config: the effort the model spends (low,
// medium, high, xhigh, max) and a structured output format.
type OutputConfig struct {
	Effort string        `json:"effort,omitempty"`
	Format *OutputFormat `json:"format,omitempty"`
}

// OutputFormat is a structured output format: {type: json_schema, schema}.
type OutputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Message is one turn. Content is a string or an array of blocks. Role
// system (a per-turn instruction) and OutputConfig (per-turn effort) are
// read side only.
type Message struct {
	Role         string          `json:"role"` // user | assistant | system
	Content      json.RawMessage `json:"content"`
	OutputConfig json.RawMessage `json:"output_config,omitempty"`
}

// Block is any content block, as read from a request or a response: the
// union of the fields of every block type. Written blocks use the typed
// structs below so that required empty fields ("text": "") are kept.
type Block struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitempty"`
	// image, document
	Source *Source `json:"source,omitempty"`
	Title  string  `json:"title,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_reference (a deferred tool loaded by a tool search)
	ToolName string `json:"tool_name,omitempty"`
	// tool_result: Content is a string or an array of blocks.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// thinking, redacted_thinking
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`

	CacheControl json.RawMessage `json:"cache_control,omitempty"`
	// Citations is an answer text's citations, or a document's
	// {"enabled": true}; Context is a document's context note.
	Citations json.RawMessage `json:"citations,omitempty"`
	Context   string          `json:"context,omitempty"`
}

// Source is where an image or document comes from. A content source
// holds its blocks in Content.
type Source struct {
	Type      string          `json:"type"` // base64 | url | text | file | content
	MediaType string          `json:"media_type,omitempty"`
	Data      string          `json:"data,omitempty"`
	URL       string          `json:"url,omitempty"`
	FileID    string          `json:"file_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

// TextBlock is a written text block.
type TextBlock struct {
	Type string `json:"type"` // text
	Text string `json:"text"`
}

// ImageBlock is a written image or document block.
type ImageBlock struct {
	Type   string `json:"type"` // image | document
	Source Source `json:"source"`
}

// ToolUseBlock is a written tool_use block. Input is a JSON object.
type ToolUseBlock struct {
	Type  string          `json:"type"` // tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ToolResultBlock is a written tool_result block. Content is a string or
// an array of blocks.
type ToolResultBlock struct {
	Type      string `json:"type"` // tool_result
	ToolUseID string `json:"tool_use_id"`
	Content   any    `json:"content,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
}

// ThinkingBlock is a written thinking block.
type ThinkingBlock struct {
	Type      string `json:"type"` // thinking
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

// Tool is one entry of tools. Type is empty or "custom" for client tools;
// server tools (web_search_..., bash_...) carry their own type. The
// fields after InputSchema are read side only.
type Tool struct {
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`

	Strict              *bool           `json:"strict,omitempty"`
	DeferLoading        *bool           `json:"defer_loading,omitempty"`
	InputExamples       json.RawMessage `json:"input_examples,omitempty"`
	AllowedCallers      json.RawMessage `json:"allowed_callers,omitempty"`
	EagerInputStreaming *bool           `json:"eager_input_streaming,omitempty"`
}

// ToolChoice is tool_choice.
type ToolChoice struct {
	Type                   string `json:"type"` // auto | any | tool | none
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// Thinking is extended thinking configuration. Display (summarized |
// omitted) says whether thinking text is returned.
type Thinking struct {
	Type         string `json:"type"` // enabled | disabled | adaptive
	BudgetTokens int64  `json:"budget_tokens,omitempty"`
	Display      string `json:"display,omitempty"`
}

// Metadata is request metadata.
type Metadata struct {
	UserID string `json:"user_id,omitempty"`
}

// Response is a unary Messages answer (and message_start's message).
type Response struct {
	ID           string            `json:"id"`
	Type         string            `json:"type"` // message
	Role         string            `json:"role"` // assistant
	Content      []json.RawMessage `json:"content"`
	Model        string            `json:"model"`
	StopReason   *string           `json:"stop_reason"`
	StopSequence *string           `json:"stop_sequence"`
	Usage        Usage             `json:"usage"`
}

// Usage counts tokens. InputTokens excludes cache reads and writes.
type Usage struct {
	InputTokens              int64                `json:"input_tokens"`
	CacheCreationInputTokens int64                `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64                `json:"cache_read_input_tokens"`
	OutputTokens             int64                `json:"output_tokens"`
	OutputTokensDetails      *OutputTokensDetails `json:"output_tokens_details,omitempty"`
}

// OutputTokensDetails splits output tokens.
type OutputTokensDetails struct {
	ThinkingTokens int64 `json:"thinking_tokens"`
}

// Stream event names (the SSE `event:` field equals the data's "type").
const (
	EventMessageStart      = "message_start"
	EventContentBlockStart = "content_block_start"
	EventContentBlockDelta = "content_block_delta"
	EventContentBlockStop  = "content_block_stop"
	EventMessageDelta      = "message_delta"
	EventMessageStop       = "message_stop"
	EventPing              = "ping"
	EventError             = "error"
)

// StreamEvent is any stream event's data, read side: the union of fields.
type StreamEvent struct {
	Type         string          `json:"type"`
	Message      *Response       `json:"message,omitempty"`
	Index        int             `json:"index"`
	ContentBlock *Block          `json:"content_block,omitempty"`
	Delta        json.RawMessage `json:"delta,omitempty"`
	Usage        *DeltaUsage     `json:"usage,omitempty"`
	Error        *ErrorBody      `json:"error,omitempty"`
}

// BlockDelta is content_block_delta.delta.
type BlockDelta struct {
	Type        string `json:"type"` // text_delta | input_json_delta | thinking_delta | signature_delta
	Text        string `json:"text,omitempty"`
	PartialJSON string `json:"partial_json,omitempty"`
	Thinking    string `json:"thinking,omitempty"`
	Signature   string `json:"signature,omitempty"`
}

// MessageDelta is message_delta.delta.
type MessageDelta struct {
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// DeltaUsage is message_delta.usage: cumulative counts; fields other than
// output_tokens may be absent.
type DeltaUsage struct {
	InputTokens              *int64               `json:"input_tokens,omitempty"`
	CacheCreationInputTokens *int64               `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *int64               `json:"cache_read_input_tokens,omitempty"`
	OutputTokens             int64                `json:"output_tokens"`
	OutputTokensDetails      *OutputTokensDetails `json:"output_tokens_details,omitempty"`
}

// Written stream events.

// MessageStartEvent is message_start.
type MessageStartEvent struct {
	Type    string   `json:"type"`
	Message Response `json:"message"`
}

// ContentBlockStartEvent is content_block_start; ContentBlock is one of the
// typed blocks.
type ContentBlockStartEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock any    `json:"content_block"`
}

// ContentBlockDeltaEvent is content_block_delta; Delta is one of the
// typed deltas.
type ContentBlockDeltaEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"`
}

// TextDelta is a text_delta.
type TextDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// InputJSONDelta is an input_json_delta.
type InputJSONDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

// ThinkingDelta is a thinking_delta.
type ThinkingDelta struct {
	Type     string `json:"type"`
	Thinking string `json:"thinking"`
}

// ContentBlockStopEvent is content_block_stop.
type ContentBlockStopEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// MessageDeltaEvent is message_delta.
type MessageDeltaEvent struct {
	Type  string       `json:"type"`
	Delta MessageDelta `json:"delta"`
	Usage Usage        `json:"usage"`
}

// TypeOnly is an event with nothing but its type (message_stop, ping).
type TypeOnly struct {
	Type string `json:"type"`
}

// CountTokensResponse is POST /v1/messages/count_tokens's answer.
type CountTokensResponse struct {
	InputTokens int64 `json:"input_tokens"`
}

// ErrorResponse is Anthropic's error body, also sent as a stream `error` event.
type ErrorResponse struct {
	Type      string    `json:"type"` // error
	Error     ErrorBody `json:"error"`
	RequestID string    `json:"request_id,omitempty"`
}

// ErrorBody is ErrorResponse.error.
type ErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
