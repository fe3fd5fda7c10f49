// Package converse holds Amazon Bedrock's Converse API wire types
// (model/{modelId}/converse and converse-stream; JSON names in
// lowerCamelCase). Types only: translation lives in internal/translate.
package converse

import "encoding/json"

// Request is the body of Converse and ConverseStream; the model is in the
// URL.
type Request struct {
	Messages        []Message        `json:"messages"`
	System          []SystemBlock    `json:"system,omitempty"`
	InferenceConfig *InferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig      *ToolConfig      `json:"toolConfig,omitempty"`
	// AdditionalModelRequestFields are passed to the model as they are
	// (Anthropic's thinking, top_k).
	AdditionalModelRequestFields map[string]any `json:"additionalModelRequestFields,omitempty"`
}

// Message is one turn: role user or assistant.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// SystemBlock is one piece of the system prompt.
type SystemBlock struct {
	Text string `json:"text"`
}

// Block is one content block; exactly one field is set.
type Block struct {
	Text             *string           `json:"text,omitempty"`
	Image            *Image            `json:"image,omitempty"`
	Document         *Document         `json:"document,omitempty"`
	ToolUse          *ToolUse          `json:"toolUse,omitempty"`
	ToolResult       *ToolResult       `json:"toolResult,omitempty"`
	ReasoningContent *ReasoningContent `json:"reasoningContent,omitempty"`
}

// Image is png, jpeg, gif or webp bytes (base64 in JSON).
type Image struct {
	Format string `json:"format"`
	Source Source `json:"source"`
}

// Document is a file (pdf, csv, doc, docx, xls, xlsx, html, txt, md).
type Document struct {
	Format string `json:"format"`
	Name   string `json:"name"`
	Source Source `json:"source"`
}

// Source holds base64 bytes.
type Source struct {
	Bytes string `json:"bytes"`
}

// ToolUse is a call the model made; Input is a JSON object.
type ToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

// ToolResult answers a ToolUse; Status is "success" or "error" (optional).
type ToolResult struct {
	ToolUseID string              `json:"toolUseId"`
	Content   []ToolResultContent `json:"content"`
	Status    string              `json:"status,omitempty"`
}

// ToolResultContent is one piece of a tool result; one field is set.
type ToolResultContent struct {
	Text  *string         `json:"text,omitempty"`
	JSON  json.RawMessage `json:"json,omitempty"`
	Image *Image          `json:"image,omitempty"`
}

// ReasoningContent is a model's reasoning: text with its signature, or
// redacted (encrypted) content.
type ReasoningContent struct {
	ReasoningText   *ReasoningText `json:"reasoningText,omitempty"`
	RedactedContent string         `json:"redactedContent,omitempty"`
}

// ReasoningText is reasoning in the clear.
type ReasoningText struct {
	Text      string `json:"text"`
	Signature string `json:"signature,omitempty"`
}

// InferenceConfig holds the common sampling parameters.
type InferenceConfig struct {
	MaxTokens     *int64   `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

// ToolConfig lists the tools and how the model may choose them.
type ToolConfig struct {
	Tools      []Tool      `json:"tools"`
	ToolChoice *ToolChoice `json:"toolChoice,omitempty"`
}

// Tool is one function tool.
type Tool struct {
	ToolSpec ToolSpec `json:"toolSpec"`
}

// ToolSpec describes a function; InputSchema.JSON is a JSON schema.
type ToolSpec struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	InputSchema InputSchema `json:"inputSchema"`
}

// InputSchema wraps a JSON schema.
type InputSchema struct {
	JSON json.RawMessage `json:"json"`
}

// ToolChoice is one of auto, any (a call is required) or tool (this one).
type ToolChoice struct {
	Auto *struct{}     `json:"auto,omitempty"`
	Any  *struct{}     `json:"any,omitempty"`
	Tool *ToolChoiceOf `json:"tool,omitempty"`
}

// ToolChoiceOf names the tool that must be called.
type ToolChoiceOf struct {
	Name string `json:"name"`
}

// Response is Converse's answer.
type Response struct {
	Output struct {
		Message *Message `json:"message"`
	} `json:"output"`
	StopReason string `json:"stopReason"`
	Usage      *Usage `json:"usage"`
}

// Usage counts tokens; InputTokens excludes the cache reads and writes.
type Usage struct {
	InputTokens           int64 `json:"inputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	TotalTokens           int64 `json:"totalTokens"`
	CacheReadInputTokens  int64 `json:"cacheReadInputTokens,omitempty"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens,omitempty"`
}

// Stream event types of ConverseStream (the :event-type of each message
// of the AWS event stream; its payload is the member's JSON).
const (
	EventMessageStart      = "messageStart"
	EventContentBlockStart = "contentBlockStart"
	EventContentBlockDelta = "contentBlockDelta"
	EventContentBlockStop  = "contentBlockStop"
	EventMessageStop       = "messageStop"
	EventMetadata          = "metadata"
)

// StreamEvent is the payload of any ConverseStream event; the fields of
// its type are set.
type StreamEvent struct {
	Role              string       `json:"role,omitempty"`
	ContentBlockIndex int          `json:"contentBlockIndex"`
	Start             *BlockStart  `json:"start,omitempty"`
	Delta             *BlockDelta  `json:"delta,omitempty"`
	StopReason        string       `json:"stopReason,omitempty"`
	Usage             *Usage       `json:"usage,omitempty"`
	Message           string       `json:"message,omitempty"` // exceptions
	Metrics           *StreamStats `json:"metrics,omitempty"`
}

// BlockStart opens a tool call block (text blocks open with their first
// delta).
type BlockStart struct {
	ToolUse *struct {
		ToolUseID string `json:"toolUseId"`
		Name      string `json:"name"`
	} `json:"toolUse,omitempty"`
}

// BlockDelta is a piece of a block: text, tool input JSON (a string to
// concatenate), or reasoning.
type BlockDelta struct {
	Text    *string `json:"text,omitempty"`
	ToolUse *struct {
		Input string `json:"input"`
	} `json:"toolUse,omitempty"`
	ReasoningContent *struct {
		Text            string `json:"text,omitempty"`
		Signature       string `json:"signature,omitempty"`
		RedactedContent string `json:"redactedContent,omitempty"`
	} `json:"reasoningContent,omitempty"`
}

// StreamStats is the metadata event's timing.
type StreamStats struct {
	LatencyMs int64 `json:"latencyMs"`
}
