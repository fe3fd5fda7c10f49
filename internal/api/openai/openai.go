// Package openai holds the OpenAI Chat Completions wire types, the gateway's
// internal form. Types only: translation lives in internal/translate.
//
// Request-side fields that accept several JSON shapes (content, stop,
// tool_choice) are json.RawMessage so that the translator sees exactly what
// the client sent.
package openai

import "encoding/json"

// ChatRequest is POST /v1/chat/completions.
type ChatRequest struct {
	Model               string             `json:"model"`
	Messages            []Message          `json:"messages"`
	MaxTokens           *int64             `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64             `json:"max_completion_tokens,omitempty"`
	Temperature         *float64           `json:"temperature,omitempty"`
	TopP                *float64           `json:"top_p,omitempty"`
	TopK                *int64             `json:"top_k,omitempty"` // extension (vLLM and others)
	N                   *int64             `json:"n,omitempty"`
	Stop                json.RawMessage    `json:"stop,omitempty"` // string or []string
	Stream              bool               `json:"stream,omitempty"`
	StreamOptions       *StreamOptions     `json:"stream_options,omitempty"`
	Tools               []Tool             `json:"tools,omitempty"`
	ToolChoice          json.RawMessage    `json:"tool_choice,omitempty"` // "none"|"auto"|"required"|{type,function:{name}}
	ParallelToolCalls   *bool              `json:"parallel_tool_calls,omitempty"`
	User                string             `json:"user,omitempty"`
	ResponseFormat      *ResponseFormat    `json:"response_format,omitempty"`
	Seed                *int64             `json:"seed,omitempty"`
	PresencePenalty     *float64           `json:"presence_penalty,omitempty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty,omitempty"`
	ReasoningEffort     string             `json:"reasoning_effort,omitempty"`
	Logprobs            *bool              `json:"logprobs,omitempty"`
	TopLogprobs         *int64             `json:"top_logprobs,omitempty"`
	LogitBias           map[string]float64 `json:"logit_bias,omitempty"`
}

// StreamOptions is stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage,omitempty"`
}

// Message is one chat message. Content is a string, an array of
// ContentPart, or null.
type Message struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content,omitempty"`
	Name             string          `json:"name,omitempty"`
	ToolCalls        []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
}

// ContentPart is one element of an array content.
type ContentPart struct {
	Type       string      `json:"type"` // text | image_url | input_audio | file | refusal
	Text       string      `json:"text,omitempty"`
	ImageURL   *ImageURL   `json:"image_url,omitempty"`
	InputAudio *InputAudio `json:"input_audio,omitempty"`
	File       *File       `json:"file,omitempty"`
	Refusal    string      `json:"refusal,omitempty"`
}

// ImageURL is an image_url part: an https URL or a data: URL.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// InputAudio is an input_audio part.
type InputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

// File is a file part; FileData is a data: URL.
type File struct {
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// Tool is one entry of tools.
type Tool struct {
	Type     string    `json:"type"`
	Function *Function `json:"function,omitempty"`
}

// Function declares a callable function.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolChoiceObject is the object form of tool_choice.
type ToolChoiceObject struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// ToolCall is a call the assistant made.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names a function and its JSON-encoded arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ResponseFormat is response_format.
type ResponseFormat struct {
	Type       string      `json:"type"` // text | json_object | json_schema
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is response_format.json_schema.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ChatCompletion is a unary answer.
type ChatCompletion struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"` // chat.completion
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []Choice `json:"choices"`
	Usage             *Usage   `json:"usage,omitempty"`
	SystemFingerprint *string  `json:"system_fingerprint,omitempty"`
}

// Choice is one answer of a ChatCompletion.
type Choice struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

// ResponseMessage is the assistant message of a Choice. ReasoningContent
// and Reasoning are the two names servers use for thinking text.
type ResponseMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	Reasoning        string     `json:"reasoning,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	Refusal          *string    `json:"refusal"`
}

// Usage counts tokens. PromptTokens includes cached tokens.
type Usage struct {
	PromptTokens            int64                    `json:"prompt_tokens"`
	CompletionTokens        int64                    `json:"completion_tokens"`
	TotalTokens             int64                    `json:"total_tokens"`
	PromptTokensDetails     *PromptTokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
	// CacheCreationInputTokens is a gateway extension carrying Anthropic's
	// cache writes, which OpenAI's schema has no field for.
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens,omitempty"`
}

// PromptTokensDetails is usage.prompt_tokens_details.
type PromptTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// CompletionTokensDetails is usage.completion_tokens_details.
type CompletionTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// ChatCompletionChunk is one streamed event's data.
type ChatCompletionChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"` // chat.completion.chunk
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	Choices           []ChunkChoice   `json:"choices"`
	Usage             *Usage          `json:"usage,omitempty"`
	SystemFingerprint *string         `json:"system_fingerprint,omitempty"`
	Error             json.RawMessage `json:"error,omitempty"`
}

// ChunkChoice is one choice of a chunk.
type ChunkChoice struct {
	Index        int             `json:"index"`
	Delta        Delta           `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs,omitempty"`
	FinishReason *string         `json:"finish_reason"`
}

// Delta is the increment of a chunk choice.
type Delta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	Reasoning        *string         `json:"reasoning,omitempty"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
	Refusal          *string         `json:"refusal,omitempty"`
}

// ToolCallDelta is a piece of a streamed tool call; Index identifies the call.
type ToolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function FunctionDelta `json:"function"`
}

// FunctionDelta is a piece of a streamed function call.
type FunctionDelta struct {
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

// ErrorResponse is OpenAI's error body.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is ErrorResponse.error.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}
