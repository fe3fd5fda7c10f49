// Package gemini holds Gemini generateContent wire types (v1beta, JSON
// names in lowerCamelCase). Types only: translation lives in
// internal/translate.
package gemini

import "encoding/json"

// Request is models/{model}:generateContent and :streamGenerateContent.
type Request struct {
	Contents          []Content         `json:"contents"`
	SystemInstruction *Content          `json:"systemInstruction,omitempty"`
	Tools             []Tool            `json:"tools,omitempty"`
	ToolConfig        *ToolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *GenerationConfig `json:"generationConfig,omitempty"`
	// Read side only: what a client may send beside the above.
	SafetySettings json.RawMessage `json:"safetySettings,omitempty"`
	CachedContent  string          `json:"cachedContent,omitempty"`
}

// CountTokensRequest is models/{model}:countTokens: either contents or a
// whole generateContentRequest.
type CountTokensRequest struct {
	Contents               []Content `json:"contents,omitempty"`
	GenerateContentRequest *Request  `json:"generateContentRequest,omitempty"`
}

// CountTokensResponse is the countTokens answer.
type CountTokensResponse struct {
	TotalTokens int64 `json:"totalTokens"`
}

// Content is one turn: role user or model (absent for systemInstruction).
type Content struct {
	Role  string `json:"role,omitempty"`
	Parts []Part `json:"parts"`
}

// Part is one piece of content; exactly one data field is set. Thought
// marks a thought summary; ThoughtSignature must be sent back with the part
// that carried it.
type Part struct {
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	InlineData       *Blob             `json:"inlineData,omitempty"`
	FileData         *FileData         `json:"fileData,omitempty"`
	FunctionCall     *FunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *FunctionResponse `json:"functionResponse,omitempty"`
	// Read side only: parts no other protocol can carry.
	ExecutableCode      json.RawMessage `json:"executableCode,omitempty"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult,omitempty"`
	VideoMetadata       json.RawMessage `json:"videoMetadata,omitempty"`
	ToolCall            json.RawMessage `json:"toolCall,omitempty"`
	ToolResponse        json.RawMessage `json:"toolResponse,omitempty"`
	MediaResolution     json.RawMessage `json:"mediaResolution,omitempty"`
}

// Blob is inline bytes, base64.
type Blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

// FileData references a file by URI.
type FileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

// FunctionCall is a call the model made. Args is a JSON object.
type FunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// FunctionResponse is the result of a call. Response is a JSON object;
// Parts (multimodal results) are read side only.
type FunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
	Parts    []Part          `json:"parts,omitempty"`
}

// Tool groups function declarations. The other fields are Google's
// hosted tools, read side only (each is an object, often empty).
type Tool struct {
	FunctionDeclarations []FunctionDeclaration `json:"functionDeclarations,omitempty"`

	GoogleSearch          json.RawMessage `json:"googleSearch,omitempty"`
	GoogleSearchRetrieval json.RawMessage `json:"googleSearchRetrieval,omitempty"`
	CodeExecution         json.RawMessage `json:"codeExecution,omitempty"`
	URLContext            json.RawMessage `json:"urlContext,omitempty"`
	FileSearch            json.RawMessage `json:"fileSearch,omitempty"`
	GoogleMaps            json.RawMessage `json:"googleMaps,omitempty"`
	ComputerUse           json.RawMessage `json:"computerUse,omitempty"`
	EnterpriseWebSearch   json.RawMessage `json:"enterpriseWebSearch,omitempty"`
	Retrieval             json.RawMessage `json:"retrieval,omitempty"`
	MCPServers            json.RawMessage `json:"mcpServers,omitempty"`
}

// FunctionDeclaration declares a function. ParametersJSONSchema takes a
// full JSON Schema; Parameters (read side) an OpenAPI subset with
// upper-case type names.
type FunctionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
	Parameters           json.RawMessage `json:"parameters,omitempty"`
	Response             json.RawMessage `json:"response,omitempty"`
	ResponseJSONSchema   json.RawMessage `json:"responseJsonSchema,omitempty"`
	Behavior             string          `json:"behavior,omitempty"`
}

// ToolConfig is toolConfig.
type ToolConfig struct {
	FunctionCallingConfig *FunctionCallingConfig `json:"functionCallingConfig,omitempty"`
	RetrievalConfig       json.RawMessage        `json:"retrievalConfig,omitempty"`
}

// FunctionCallingConfig picks how functions may be called.
type FunctionCallingConfig struct {
	Mode                 string   `json:"mode"` // AUTO | ANY | NONE | VALIDATED
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

// GenerationConfig is generationConfig.
type GenerationConfig struct {
	StopSequences      []string        `json:"stopSequences,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	CandidateCount     *int64          `json:"candidateCount,omitempty"`
	MaxOutputTokens    *int64          `json:"maxOutputTokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	TopK               *int64          `json:"topK,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	PresencePenalty    *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty,omitempty"`
	ThinkingConfig     *ThinkingConfig `json:"thinkingConfig,omitempty"`

	// Read side only.
	ResponseSchema             json.RawMessage `json:"responseSchema,omitempty"` // OpenAPI subset
	ResponseModalities         []string        `json:"responseModalities,omitempty"`
	ResponseLogprobs           *bool           `json:"responseLogprobs,omitempty"`
	Logprobs                   *int64          `json:"logprobs,omitempty"`
	MediaResolution            string          `json:"mediaResolution,omitempty"`
	SpeechConfig               json.RawMessage `json:"speechConfig,omitempty"`
	ImageConfig                json.RawMessage `json:"imageConfig,omitempty"`
	AudioTimestamp             *bool           `json:"audioTimestamp,omitempty"`
	EnableEnhancedCivicAnswers *bool           `json:"enableEnhancedCivicAnswers,omitempty"`
	RoutingConfig              json.RawMessage `json:"routingConfig,omitempty"`
	ModelSelectionConfig       json.RawMessage `json:"modelSelectionConfig,omitempty"`
	EnableAffectiveDialog      *bool           `json:"enableAffectiveDialog,omitempty"`
}

// ThinkingConfig bounds thinking and asks for thought summaries.
// ThinkingLevel (MINIMAL | LOW | MEDIUM | HIGH) is the newer models'
// alternative to a budget.
type ThinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int64 `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

// Response is a generateContent answer and each streamed event's data.
type Response struct {
	Candidates     []Candidate     `json:"candidates,omitempty"`
	PromptFeedback *PromptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  *UsageMetadata  `json:"usageMetadata,omitempty"`
	ModelVersion   string          `json:"modelVersion,omitempty"`
	ResponseID     string          `json:"responseId,omitempty"`
}

// Candidate is one answer.
type Candidate struct {
	Content       *Content        `json:"content,omitempty"`
	FinishReason  string          `json:"finishReason,omitempty"`
	FinishMessage string          `json:"finishMessage,omitempty"`
	Index         int             `json:"index"`
	SafetyRatings json.RawMessage `json:"safetyRatings,omitempty"`
}

// PromptFeedback reports a blocked prompt.
type PromptFeedback struct {
	BlockReason        string          `json:"blockReason,omitempty"`
	BlockReasonMessage string          `json:"blockReasonMessage,omitempty"`
	SafetyRatings      json.RawMessage `json:"safetyRatings,omitempty"`
}

// UsageMetadata counts tokens. CandidatesTokenCount excludes thoughts;
// PromptTokenCount includes cached content.
type UsageMetadata struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount,omitempty"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount,omitempty"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount,omitempty"`
}

// ErrorResponse is Google's error body.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is ErrorResponse.error.
type ErrorBody struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Status  string          `json:"status"`
	Details json.RawMessage `json:"details,omitempty"`
}

// Model is one entry of GET /v1beta/models (and GET /v1beta/models/{m}).
type Model struct {
	Name                       string   `json:"name"` // models/{model}
	BaseModelID                string   `json:"baseModelId,omitempty"`
	Version                    string   `json:"version,omitempty"`
	DisplayName                string   `json:"displayName,omitempty"`
	Description                string   `json:"description,omitempty"`
	InputTokenLimit            int64    `json:"inputTokenLimit,omitempty"`
	OutputTokenLimit           int64    `json:"outputTokenLimit,omitempty"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"` // generateContent, streamGenerateContent, countTokens
	Thinking                   bool     `json:"thinking,omitempty"`
}

// ListModelsResponse is GET /v1beta/models.
type ListModelsResponse struct {
	Models        []Model `json:"models"`
	NextPageToken string  `json:"nextPageToken,omitempty"`
}
