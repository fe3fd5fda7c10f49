package openai

import "encoding/json"

// ResponsesRequest is POST /v1/responses, read side. Fields that take
// several JSON shapes (input, instructions, tool_choice, tools) are raw
// so that the translator sees exactly what the client sent.
type ResponsesRequest struct {
	Model             string              `json:"model"`
	Input             json.RawMessage     `json:"input"`        // string or []InputItem
	Instructions      json.RawMessage     `json:"instructions"` // string
	Tools             []json.RawMessage   `json:"tools"`        // each a ResponsesTool by type
	ToolChoice        json.RawMessage     `json:"tool_choice"`
	ParallelToolCalls *bool               `json:"parallel_tool_calls"`
	Reasoning         *ResponsesReasoning `json:"reasoning"`
	Text              *ResponsesText      `json:"text"`
	MaxOutputTokens   *int64              `json:"max_output_tokens"`
	Temperature       *float64            `json:"temperature"`
	TopP              *float64            `json:"top_p"`
	TopLogprobs       *int64              `json:"top_logprobs"`
	Stream            bool                `json:"stream"`
	Store             *bool               `json:"store"`
	Background        *bool               `json:"background"`
	Metadata          json.RawMessage     `json:"metadata"`
	User              string              `json:"user"`
	Truncation        string              `json:"truncation"`
}

// ResponsesReasoning is reasoning: effort and whether to summarize.
type ResponsesReasoning struct {
	Effort          string `json:"effort,omitempty"`
	Summary         string `json:"summary,omitempty"`          // auto | concise | detailed
	GenerateSummary string `json:"generate_summary,omitempty"` // deprecated spelling of summary
}

// ResponsesText is text: the output format and verbosity.
type ResponsesText struct {
	Format    *ResponsesTextFormat `json:"format,omitempty"`
	Verbosity string               `json:"verbosity,omitempty"`
}

// ResponsesTextFormat is text.format: text | json_object | json_schema.
type ResponsesTextFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// InputItem is one element of input, read side: the union of the fields
// of every item type (message, function_call, function_call_output,
// custom_tool_call, custom_tool_call_output, reasoning, ...). A message
// may come without a type.
type InputItem struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // string or []InputContent
	Status  string          `json:"status"`
	Phase   string          `json:"phase"`
	// function_call, custom_tool_call and their outputs
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"` // string or []InputContent
	// reasoning
	Summary          []SummaryText `json:"summary"`
	EncryptedContent *string       `json:"encrypted_content"`
}

// InputContent is one content part of an input message or a tool
// output: input_text, input_image, input_file, output_text, refusal.
type InputContent struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	FileData string `json:"file_data"`
	FileURL  string `json:"file_url"`
	Filename string `json:"filename"`
	Detail   string `json:"detail"`
}

// ResponsesTool is one element of tools, read side: function, custom,
// namespace and the hosted tools, by type.
type ResponsesTool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Parameters   json.RawMessage `json:"parameters"`
	Strict       *bool           `json:"strict"`
	DeferLoading *bool           `json:"defer_loading"`
	// custom: {"type":"text"} or {"type":"grammar","syntax","definition"}
	Format *CustomToolFormat `json:"format"`
	// namespace
	Tools []json.RawMessage `json:"tools"`
	// web_search
	ExternalWebAccess *bool `json:"external_web_access"`
}

// CustomToolFormat is a custom tool's input format.
type CustomToolFormat struct {
	Type       string `json:"type"` // text | grammar
	Syntax     string `json:"syntax,omitempty"`
	Definition string `json:"definition,omitempty"`
}

// Response is a Responses API answer (and the response carried by the
// response.* stream events).
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"` // response
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"` // in_progress | completed | incomplete | failed
	Background         bool               `json:"background"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       json.RawMessage    `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []json.RawMessage  `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          json.RawMessage    `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        *float64           `json:"temperature"`
	Text               json.RawMessage    `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              json.RawMessage    `json:"tools"`
	TopP               *float64           `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *ResponsesUsage    `json:"usage"`
	User               *string            `json:"user"`
	Metadata           json.RawMessage    `json:"metadata"`
}

// ResponseError is Response.error.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete:
// max_output_tokens or content_filter.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// ResponsesUsage counts tokens. InputTokens includes cached tokens;
// OutputTokens includes reasoning tokens.
type ResponsesUsage struct {
	InputTokens         int64               `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int64               `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int64               `json:"total_tokens"`
}

// InputTokensDetails is usage.input_tokens_details.
type InputTokensDetails struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

// OutputTokensDetails is usage.output_tokens_details.
type OutputTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// Output items, write side.

// OutputMessage is a message output item.
type OutputMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`   // message
	Status  string `json:"status"` // in_progress | completed | incomplete
	Role    string `json:"role"`   // assistant
	Content []any  `json:"content"`
}

// OutputText is an output_text content part.
type OutputText struct {
	Type        string            `json:"type"` // output_text
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
}

// OutputRefusal is a refusal content part.
type OutputRefusal struct {
	Type    string `json:"type"` // refusal
	Refusal string `json:"refusal"`
}

// FunctionCallItem is a function_call output item.
type FunctionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"` // function_call
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Arguments string `json:"arguments"`
}

// CustomToolCallItem is a custom_tool_call output item.
type CustomToolCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"` // custom_tool_call
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Input     string `json:"input"`
}

// ReasoningItem is a reasoning output item.
type ReasoningItem struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"` // reasoning
	Status  string        `json:"status,omitempty"`
	Summary []SummaryText `json:"summary"`
}

// SummaryText is one reasoning summary part.
type SummaryText struct {
	Type string `json:"type"` // summary_text
	Text string `json:"text"`
}

// Stream events, write side. Every event carries its type and a
// sequence_number counting from 0.

// ResponseEvent is response.created, response.in_progress,
// response.completed, response.incomplete and response.failed.
type ResponseEvent struct {
	Type           string    `json:"type"`
	SequenceNumber int64     `json:"sequence_number"`
	Response       *Response `json:"response"`
}

// OutputItemEvent is response.output_item.added and .done.
type OutputItemEvent struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
	OutputIndex    int    `json:"output_index"`
	Item           any    `json:"item"`
}

// ContentPartEvent is response.content_part.added and .done.
type ContentPartEvent struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Part           any    `json:"part"`
}

// TextDeltaEvent is response.output_text.delta.
type TextDeltaEvent struct {
	Type           string            `json:"type"`
	SequenceNumber int64             `json:"sequence_number"`
	ItemID         string            `json:"item_id"`
	OutputIndex    int               `json:"output_index"`
	ContentIndex   int               `json:"content_index"`
	Delta          string            `json:"delta"`
	Logprobs       []json.RawMessage `json:"logprobs"`
}

// TextDoneEvent is response.output_text.done.
type TextDoneEvent struct {
	Type           string            `json:"type"`
	SequenceNumber int64             `json:"sequence_number"`
	ItemID         string            `json:"item_id"`
	OutputIndex    int               `json:"output_index"`
	ContentIndex   int               `json:"content_index"`
	Text           string            `json:"text"`
	Logprobs       []json.RawMessage `json:"logprobs"`
}

// RefusalDeltaEvent is response.refusal.delta.
type RefusalDeltaEvent struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Delta          string `json:"delta"`
}

// RefusalDoneEvent is response.refusal.done.
type RefusalDoneEvent struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Refusal        string `json:"refusal"`
}

// ArgumentsDeltaEvent is response.function_call_arguments.delta and
// response.custom_tool_call_input.delta.
type ArgumentsDeltaEvent struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Delta          string `json:"delta"`
}

// ArgumentsDoneEvent is response.function_call_arguments.done.
type ArgumentsDoneEvent struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Name           string `json:"name,omitempty"`
	Arguments      string `json:"arguments"`
}

// CustomInputDoneEvent is response.custom_tool_call_input.done.
type CustomInputDoneEvent struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Input          string `json:"input"`
}

// SummaryPartEvent is response.reasoning_summary_part.added and .done.
type SummaryPartEvent struct {
	Type           string      `json:"type"`
	SequenceNumber int64       `json:"sequence_number"`
	ItemID         string      `json:"item_id"`
	OutputIndex    int         `json:"output_index"`
	SummaryIndex   int         `json:"summary_index"`
	Part           SummaryText `json:"part"`
}

// SummaryTextDeltaEvent is response.reasoning_summary_text.delta.
type SummaryTextDeltaEvent struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	SummaryIndex   int    `json:"summary_index"`
	Delta          string `json:"delta"`
}

// SummaryTextDoneEvent is response.reasoning_summary_text.done.
type SummaryTextDoneEvent struct {
	Type           string `json:"type"`
	SequenceNumber int64  `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	SummaryIndex   int    `json:"summary_index"`
	Text           string `json:"text"`
}

// ErrorEvent is the stream's error event.
type ErrorEvent struct {
	Type           string  `json:"type"` // error
	SequenceNumber int64   `json:"sequence_number"`
	Code           *string `json:"code"`
	Message        string  `json:"message"`
	Param          *string `json:"param"`
}
