package translate

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"switchboard/internal/api/gemini"
	"switchboard/internal/api/openai"
)

// geminiInFields is what FromGemini does with each generateContent field.
var geminiInFields = map[string]fieldRule{
	"contents": mapped, "systemInstruction": mapped, "tools": mapped, "toolConfig": mapped,
	"generationConfig": mapped,
	"model":            mapped, // the URL names the model; a body's copy is ignored
	// The target applies its own safety filters; labels and the service
	// tier are billing metadata.
	"safetySettings": dropped, "labels": dropped, "serviceTier": dropped,
}

var geminiInRefusals = map[string]refusal{
	"cachedContent":      "cached content is held by Google; other providers cannot read it",
	"system_instruction": `write "systemInstruction": the gateway reads Gemini's JSON names in lowerCamelCase`,
	"generation_config":  `write "generationConfig": the gateway reads Gemini's JSON names in lowerCamelCase`,
	"tool_config":        `write "toolConfig": the gateway reads Gemini's JSON names in lowerCamelCase`,
	"safety_settings":    `write "safetySettings": the gateway reads Gemini's JSON names in lowerCamelCase`,
	"cached_content":     "cached content is held by Google; other providers cannot read it",
}

var geminiGenFields = map[string]fieldRule{
	"stopSequences": mapped, "responseMimeType": mapped, "responseSchema": mapped, "responseJsonSchema": mapped,
	"candidateCount": mapped, "maxOutputTokens": mapped, "temperature": mapped, "topP": mapped, "topK": mapped,
	"seed": mapped, "presencePenalty": mapped, "frequencyPenalty": mapped, "thinkingConfig": mapped,
	"responseLogprobs": mapped, "logprobs": mapped, "responseModalities": mapped,
	// Input media resolution, Google's model routing and civic answers
	// are Google's own knobs.
	"mediaResolution": dropped, "routingConfig": dropped, "modelSelectionConfig": dropped,
	"enableEnhancedCivicAnswers": dropped,
}

var geminiGenRefusals = map[string]refusal{
	"speechConfig":          "audio output is not supported across protocols",
	"imageConfig":           "image output is not supported across protocols",
	"audioTimestamp":        "audio timestamps need a gemini provider",
	"enableAffectiveDialog": "affective dialog needs a gemini provider",
}

// thinkingLevel -> reasoning_effort.
var geminiLevelEffort = map[string]string{"MINIMAL": "minimal", "LOW": "low", "MEDIUM": "medium", "HIGH": "high"}

// GeminiInbound is a Gemini generateContent request translated into the
// internal form, with what its answer needs.
type GeminiInbound struct {
	Inbound
	includeThoughts bool
}

// FromGemini translates a Gemini generateContent request (POST
// /v1beta/models/{model}:generateContent, or :streamGenerateContent when
// stream is set) into the internal form for a provider that is not
// gemini. model is the URL's. A *FieldError refuses the request.
func FromGemini(body []byte, model string, stream bool) (*GeminiInbound, error) {
	var d drops
	const target = "the gateway's Gemini translation"
	if err := classify(body, geminiInFields, geminiInRefusals, target, &d); err != nil {
		return nil, err
	}
	var in gemini.Request
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, decodeErr(err)
	}
	var raw struct {
		GenerationConfig json.RawMessage `json:"generationConfig"`
	}
	_ = json.Unmarshal(body, &raw)
	if err := classifyAt("generationConfig", raw.GenerationConfig, geminiGenFields, geminiGenRefusals, target, &d); err != nil {
		return nil, err
	}
	out := openai.ChatRequest{Model: model, Stream: stream}
	if stream {
		out.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	g := &GeminiInbound{}
	if gc := in.GenerationConfig; gc != nil {
		if err := chatGeneration(gc, &out, &d, &g.includeThoughts); err != nil {
			return nil, err
		}
	}
	if err := chatGeminiTools(&in, &out, &d); err != nil {
		return nil, err
	}
	if err := chatContents(&in, &out, &d); err != nil {
		return nil, err
	}
	g.Inbound = Inbound{Body: marshal(out), Model: model, Stream: stream, Dropped: d.list}
	return g, nil
}

func chatGeneration(gc *gemini.GenerationConfig, out *openai.ChatRequest, d *drops, thoughts *bool) error {
	out.Temperature, out.TopP, out.TopK, out.Seed = gc.Temperature, gc.TopP, gc.TopK, gc.Seed
	out.PresencePenalty, out.FrequencyPenalty = gc.PresencePenalty, gc.FrequencyPenalty
	if gc.MaxOutputTokens != nil {
		out.MaxTokens = gc.MaxOutputTokens
	}
	if n := gc.CandidateCount; n != nil && *n != 1 {
		out.N = n
	}
	if len(gc.StopSequences) > 0 {
		out.Stop = marshal(gc.StopSequences)
	}
	if gc.ResponseLogprobs != nil && *gc.ResponseLogprobs {
		out.Logprobs = ptr(true)
		out.TopLogprobs = gc.Logprobs
	}
	for _, m := range gc.ResponseModalities {
		if !strings.EqualFold(m, "TEXT") {
			return fieldErr("generationConfig.responseModalities", "only TEXT output is supported across protocols")
		}
	}
	if err := chatResponseFormat(gc, out); err != nil {
		return err
	}
	tc := gc.ThinkingConfig
	if tc == nil {
		return nil
	}
	*thoughts = tc.IncludeThoughts
	switch {
	case tc.ThinkingLevel != "":
		e, ok := geminiLevelEffort[strings.ToUpper(tc.ThinkingLevel)]
		if !ok {
			return fieldErr("generationConfig.thinkingConfig.thinkingLevel", "unknown value %q", tc.ThinkingLevel)
		}
		out.ReasoningEffort = e
		if tc.ThinkingBudget != nil {
			d.add("generationConfig.thinkingConfig.thinkingBudget") // the level wins
		}
	case tc.ThinkingBudget != nil:
		switch b := *tc.ThinkingBudget; {
		case b == -1: // dynamic: the model decides
		case b == 0:
			out.ReasoningEffort = "none"
		case b < 0:
			return fieldErr("generationConfig.thinkingConfig.thinkingBudget", "must be -1, 0 or a token count")
		case b <= 1024:
			out.ReasoningEffort = "low"
		case b <= 8192:
			out.ReasoningEffort = "medium"
		default:
			out.ReasoningEffort = "high"
		}
	}
	return nil
}

// chatResponseFormat maps responseMimeType and a response schema.
func chatResponseFormat(gc *gemini.GenerationConfig, out *openai.ChatRequest) error {
	schema, field := gc.ResponseJSONSchema, "generationConfig.responseJsonSchema"
	if !present(schema) {
		schema, field = gc.ResponseSchema, "generationConfig.responseSchema"
	}
	switch mt := strings.ToLower(gc.ResponseMimeType); mt {
	case "", "text/plain":
		if present(schema) {
			return fieldErr(field, `needs responseMimeType "application/json"`)
		}
		return nil
	case "application/json":
	default:
		return fieldErr("generationConfig.responseMimeType", "%q output is not supported across protocols", gc.ResponseMimeType)
	}
	if !present(schema) {
		out.ResponseFormat = &openai.ResponseFormat{Type: "json_object"}
		return nil
	}
	s, err := jsonSchema(schema, field)
	if err != nil {
		return err
	}
	out.ResponseFormat = &openai.ResponseFormat{Type: "json_schema", JSONSchema: &openai.JSONSchema{Name: "response", Schema: s}}
	return nil
}

func chatGeminiTools(in *gemini.Request, out *openai.ChatRequest, d *drops) error {
	for i, t := range in.Tools {
		f := fmt.Sprintf("tools[%d]", i)
		for _, h := range []named{{"googleSearch", t.GoogleSearch}, {"googleSearchRetrieval", t.GoogleSearchRetrieval},
			{"codeExecution", t.CodeExecution}, {"urlContext", t.URLContext}, {"fileSearch", t.FileSearch},
			{"googleMaps", t.GoogleMaps}, {"computerUse", t.ComputerUse}, {"enterpriseWebSearch", t.EnterpriseWebSearch},
			{"retrieval", t.Retrieval}, {"mcpServers", t.MCPServers}} {
			if present(h.raw) {
				return fieldErr(f+"."+h.name, "Google's hosted tool runs only on gemini providers")
			}
		}
		for j, fd := range t.FunctionDeclarations {
			ff := fmt.Sprintf("%s.functionDeclarations[%d]", f, j)
			if fd.Name == "" {
				return fieldErr(ff+".name", "required")
			}
			schema, sf := fd.ParametersJSONSchema, ff+".parametersJsonSchema"
			if !present(schema) {
				schema, sf = fd.Parameters, ff+".parameters"
			}
			fn := &openai.Function{Name: fd.Name, Description: fd.Description}
			if present(schema) {
				s, err := jsonSchema(schema, sf)
				if err != nil {
					return err
				}
				fn.Parameters = s
			} else {
				fn.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			d.addRaw(ff+".response", fd.Response) // the result's schema only documents it
			d.addRaw(ff+".responseJsonSchema", fd.ResponseJSONSchema)
			if fd.Behavior != "" {
				d.add(ff + ".behavior")
			}
			out.Tools = append(out.Tools, openai.Tool{Type: "function", Function: fn})
		}
	}
	tc := in.ToolConfig
	if tc == nil {
		return nil
	}
	d.addRaw("toolConfig.retrievalConfig", tc.RetrievalConfig)
	fc := tc.FunctionCallingConfig
	if fc == nil {
		return nil
	}
	const field = "toolConfig.functionCallingConfig"
	switch strings.ToUpper(fc.Mode) {
	case "", "MODE_UNSPECIFIED", "AUTO", "VALIDATED":
		// VALIDATED is AUTO with calls checked against their schema,
		// which providers that enforce schemas do anyway.
		if fc.Mode != "" && len(out.Tools) > 0 {
			out.ToolChoice = marshal("auto")
		}
		if len(fc.AllowedFunctionNames) > 0 {
			return allowedFunctions(fc.AllowedFunctionNames, out, field, "auto")
		}
	case "ANY":
		out.ToolChoice = marshal("required")
		if len(fc.AllowedFunctionNames) > 0 {
			return allowedFunctions(fc.AllowedFunctionNames, out, field, "required")
		}
	case "NONE":
		out.ToolChoice = marshal("none")
	default:
		return fieldErr(field+".mode", "unknown value %q", fc.Mode)
	}
	return nil
}

// allowedFunctions narrows the tools to the allowed names: one name
// forced becomes a named tool_choice, several keep only those tools.
func allowedFunctions(names []string, out *openai.ChatRequest, field, mode string) error {
	allowed := map[string]bool{}
	for _, n := range names {
		allowed[n] = true
	}
	var kept []openai.Tool
	for _, t := range out.Tools {
		if allowed[t.Function.Name] {
			kept = append(kept, t)
		}
	}
	if len(kept) != len(allowed) {
		return fieldErr(field+".allowedFunctionNames", "names a function that tools does not declare")
	}
	if len(kept) == 1 && mode == "required" {
		o := openai.ToolChoiceObject{Type: "function"}
		o.Function.Name = kept[0].Function.Name
		out.ToolChoice = marshal(o)
		return nil
	}
	// The model may not call the others: they are left out.
	out.Tools = kept
	return nil
}

// geminiCall is a functionCall of the history still waiting for its
// functionResponse.
type geminiCall struct {
	id, name string
	answered bool
}

// chatContents maps systemInstruction and contents to messages. Calls
// without an id get one from their position, so that a history sent
// again maps to the same ids; a functionResponse without an id answers
// the earliest unanswered call of its name.
func chatContents(in *gemini.Request, out *openai.ChatRequest, d *drops) error {
	if si := in.SystemInstruction; si != nil {
		texts := make([]string, 0, len(si.Parts))
		for j, p := range si.Parts {
			if p.Text == "" && !isEmptyPart(p) {
				return fieldErr(fmt.Sprintf("systemInstruction.parts[%d]", j), "only text parts are allowed")
			}
			texts = append(texts, p.Text)
		}
		if s := strings.Join(texts, "\n\n"); s != "" {
			out.Messages = append(out.Messages, openai.Message{Role: "system", Content: marshal(s)})
		}
	}
	var calls []*geminiCall
	for i, c := range in.Contents {
		f := fmt.Sprintf("contents[%d]", i)
		switch c.Role {
		case "", "user", "function":
			msgs, err := chatUserContent(c, f, &calls, d)
			if err != nil {
				return err
			}
			out.Messages = append(out.Messages, msgs...)
		case "model":
			msg, err := chatModelContent(c, f, i, &calls, d)
			if err != nil {
				return err
			}
			if msg != nil {
				out.Messages = append(out.Messages, *msg)
			}
		default:
			return fieldErr(f+".role", `must be "user" or "model"`)
		}
	}
	if len(out.Messages) == 0 || len(in.Contents) == 0 {
		return fieldErr("contents", "required")
	}
	return nil
}

// isEmptyPart: a part with no data at all (clients send {"text": ""}).
func isEmptyPart(p gemini.Part) bool {
	return p.InlineData == nil && p.FileData == nil && p.FunctionCall == nil && p.FunctionResponse == nil &&
		!present(p.ExecutableCode) && !present(p.CodeExecutionResult) && !present(p.ToolCall) && !present(p.ToolResponse)
}

// named is a field by name, checked in a fixed order.
type named struct {
	name string
	raw  json.RawMessage
}

// unsupportedPart names a part kind no other protocol carries.
func unsupportedPart(p gemini.Part, field string) error {
	for _, n := range []named{{"executableCode", p.ExecutableCode}, {"codeExecutionResult", p.CodeExecutionResult},
		{"toolCall", p.ToolCall}, {"toolResponse", p.ToolResponse}, {"videoMetadata", p.VideoMetadata}} {
		if present(n.raw) {
			return fieldErr(field+"."+n.name, "cannot be translated for a provider that is not gemini")
		}
	}
	return nil
}

func chatUserContent(c gemini.Content, field string, calls *[]*geminiCall, d *drops) ([]openai.Message, error) {
	var tools []openai.Message
	var moved, parts []openai.ContentPart
	for j, p := range c.Parts {
		f := fmt.Sprintf("%s.parts[%d]", field, j)
		if err := unsupportedPart(p, f); err != nil {
			return nil, err
		}
		d.addRaw(f+".mediaResolution", p.MediaResolution)
		if p.ThoughtSignature != "" {
			d.add(f + ".thoughtSignature")
		}
		switch {
		case p.FunctionResponse != nil:
			fr := p.FunctionResponse
			id, err := answerCall(*calls, fr, f+".functionResponse")
			if err != nil {
				return nil, err
			}
			content := "{}"
			if present(fr.Response) {
				content = compactJSON(fr.Response)
			}
			tools = append(tools, openai.Message{Role: "tool", ToolCallID: id, Content: marshal(content)})
			var media []openai.ContentPart
			for k, rp := range fr.Parts {
				cp, err := chatGeminiMedia(rp, fmt.Sprintf("%s.functionResponse.parts[%d]", f, k))
				if err != nil {
					return nil, err
				}
				media = append(media, cp)
			}
			if len(media) > 0 {
				moved = append(moved, openai.ContentPart{Type: "text", Text: "Attached to the result of tool call " + id + ":"})
				moved = append(moved, media...)
			}
		case p.FunctionCall != nil:
			return nil, fieldErr(f+".functionCall", "a function call belongs in a model turn")
		case p.Thought:
			d.add(f) // a thought summary in user input carries nothing to answer
		case p.InlineData != nil || p.FileData != nil:
			cp, err := chatGeminiMedia(p, f)
			if err != nil {
				return nil, err
			}
			parts = append(parts, cp)
		case p.Text != "":
			parts = append(parts, openai.ContentPart{Type: "text", Text: p.Text})
		}
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
}

// answerCall finds the call a functionResponse answers: by id, else the
// earliest unanswered call of its name.
func answerCall(calls []*geminiCall, fr *gemini.FunctionResponse, field string) (string, error) {
	if fr.ID != "" {
		for _, c := range calls {
			if c.id == fr.ID {
				c.answered = true
				return c.id, nil
			}
		}
	}
	// No id, or one the calls do not carry (a client that named the
	// calls itself): the earliest unanswered call of that name.
	for _, c := range calls {
		if !c.answered && c.name == fr.Name {
			c.answered = true
			return c.id, nil
		}
	}
	if fr.ID != "" {
		return fr.ID, nil // a call the history does not hold: the provider judges
	}
	return "", fieldErr(field+".name", "answers no earlier functionCall named %q", fr.Name)
}

func chatModelContent(c gemini.Content, field string, turn int, calls *[]*geminiCall, d *drops) (*openai.Message, error) {
	msg := openai.Message{Role: "assistant"}
	var text strings.Builder
	for j, p := range c.Parts {
		f := fmt.Sprintf("%s.parts[%d]", field, j)
		if err := unsupportedPart(p, f); err != nil {
			return nil, err
		}
		if p.ThoughtSignature != "" {
			d.add(f + ".thoughtSignature") // signed for Gemini only
		}
		switch {
		case p.FunctionCall != nil:
			fc := p.FunctionCall
			id := fc.ID
			if id == "" {
				id = fmt.Sprintf("call_%d_%d", turn, j)
			}
			*calls = append(*calls, &geminiCall{id: id, name: fc.Name})
			args := "{}"
			if present(fc.Args) {
				a, err := jsonObject(string(fc.Args), f+".functionCall.args")
				if err != nil {
					return nil, err
				}
				args = string(a)
			}
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: id, Type: "function",
				Function: openai.FunctionCall{Name: fc.Name, Arguments: args}})
		case p.Thought:
			d.add(f) // Gemini's own thoughts: other providers refuse or ignore them
		case p.FunctionResponse != nil:
			return nil, fieldErr(f+".functionResponse", "a function response belongs in a user turn")
		case p.InlineData != nil || p.FileData != nil:
			return nil, fieldErr(f, "media in a model turn cannot be translated")
		default:
			text.WriteString(p.Text)
		}
	}
	if text.Len() == 0 && len(msg.ToolCalls) == 0 {
		return nil, nil // thoughts only
	}
	if text.Len() > 0 || len(msg.ToolCalls) == 0 {
		msg.Content = marshal(text.String())
	}
	return &msg, nil
}

// chatGeminiMedia maps inlineData and fileData parts.
func chatGeminiMedia(p gemini.Part, field string) (openai.ContentPart, error) {
	if fd := p.FileData; fd != nil {
		if isHTTPURL(fd.FileURI) && (fd.MimeType == "" || strings.HasPrefix(fd.MimeType, "image/")) {
			return openai.ContentPart{Type: "image_url", ImageURL: &openai.ImageURL{URL: fd.FileURI}}, nil
		}
		return openai.ContentPart{}, fieldErr(field+".fileData", "only http(s) image URLs can be translated; files stored at Google are readable by gemini providers only")
	}
	id := p.InlineData
	if id == nil {
		return openai.ContentPart{}, fieldErr(field, "needs inlineData or fileData")
	}
	mime := strings.ToLower(id.MimeType)
	switch {
	case strings.HasPrefix(mime, "image/"):
		return openai.ContentPart{Type: "image_url", ImageURL: &openai.ImageURL{URL: "data:" + mime + ";base64," + id.Data}}, nil
	case mime == "audio/wav" || mime == "audio/x-wav":
		return openai.ContentPart{Type: "input_audio", InputAudio: &openai.InputAudio{Data: id.Data, Format: "wav"}}, nil
	case mime == "audio/mp3" || mime == "audio/mpeg":
		return openai.ContentPart{Type: "input_audio", InputAudio: &openai.InputAudio{Data: id.Data, Format: "mp3"}}, nil
	case mime == "application/pdf":
		return openai.ContentPart{Type: "file", File: &openai.File{FileData: "data:application/pdf;base64," + id.Data, Filename: "document.pdf"}}, nil
	case strings.HasPrefix(mime, "text/"):
		b, err := base64.StdEncoding.DecodeString(id.Data)
		if err != nil {
			return openai.ContentPart{}, fieldErr(field+".inlineData.data", "is not base64")
		}
		return openai.ContentPart{Type: "text", Text: string(b)}, nil
	}
	return openai.ContentPart{}, fieldErr(field+".inlineData.mimeType", "%q cannot be translated for a provider that is not gemini", id.MimeType)
}

// geminiFinishOf maps finish_reason to finishReason.
func geminiFinishOf(finish string) string {
	switch finish {
	case "":
		return ""
	case "length":
		return "MAX_TOKENS"
	case "content_filter":
		return "SAFETY"
	}
	return "STOP" // stop, tool_calls
}

func geminiUsageOf(u Usage) *gemini.UsageMetadata {
	return &gemini.UsageMetadata{PromptTokenCount: u.Input, CandidatesTokenCount: max(0, u.Output-u.Reasoning),
		ThoughtsTokenCount: u.Reasoning, TotalTokenCount: u.Input + u.Output, CachedContentTokenCount: u.CacheRead}
}

// functionCallPart is a tool call as a functionCall part; the call id
// rides along so that the client's functionResponse can name it.
func functionCallPart(id, name, args string) gemini.Part {
	obj, err := jsonObject(args, "")
	if err != nil {
		obj = json.RawMessage("{}") // a model's malformed arguments: nothing to recover
	}
	return gemini.Part{FunctionCall: &gemini.FunctionCall{ID: id, Name: name, Args: obj}}
}

// Answer translates the internal answer (a chat.completion) into a
// GenerateContentResponse, with its usage. model, when not "", is the
// modelVersion; else the completion's model. Thoughts are included only
// when the request asked for them (thinkingConfig.includeThoughts).
func (g *GeminiInbound) Answer(chatResp []byte, model string) ([]byte, Usage, error) {
	var c openai.ChatCompletion
	if err := json.Unmarshal(chatResp, &c); err != nil {
		return nil, Usage{}, &ProtocolError{Msg: "answer is not a chat.completion"}
	}
	u := usageFromOpenAI(c.Usage)
	if model == "" {
		model = c.Model
	}
	r := gemini.Response{ResponseID: c.ID, ModelVersion: model, UsageMetadata: geminiUsageOf(u), Candidates: []gemini.Candidate{}}
	for _, ch := range c.Choices {
		m := ch.Message
		parts := []gemini.Part{}
		if th := m.ReasoningContent + m.Reasoning; th != "" && g.includeThoughts {
			parts = append(parts, gemini.Part{Text: th, Thought: true})
		}
		if m.Content != nil && *m.Content != "" {
			parts = append(parts, gemini.Part{Text: *m.Content})
		}
		if m.Refusal != nil && *m.Refusal != "" {
			parts = append(parts, gemini.Part{Text: *m.Refusal})
		}
		for _, tc := range m.ToolCalls {
			parts = append(parts, functionCallPart(tc.ID, tc.Function.Name, tc.Function.Arguments))
		}
		r.Candidates = append(r.Candidates, gemini.Candidate{Content: &gemini.Content{Role: "model", Parts: parts},
			FinishReason: geminiFinishOf(ch.FinishReason), Index: ch.Index})
	}
	return marshal(r), u, nil
}

// Stream returns the translator of one streamed answer; model is as for
// Answer.
func (g *GeminiInbound) Stream(model string) *GeminiStream {
	return &GeminiStream{model: model, includeThoughts: g.includeThoughts, cands: map[int]*geminiOut{}}
}

// GeminiStream translates the internal chunk stream into
// streamGenerateContent events: each a whole GenerateContentResponse
// (Event.Name is empty). Text and thoughts pass as they arrive; a tool
// call is sent whole, as Gemini does, once its choice finishes; the last
// event carries the finishReason of every candidate and the usage. Frame
// the events as SSE (alt=sse: "data: <event>") or with GeminiArray.
type GeminiStream struct {
	model, id       string
	includeThoughts bool
	finished        bool
	cands           map[int]*geminiOut
	order           []int
	usage           Usage
}

// geminiOut is one candidate of a GeminiStream.
type geminiOut struct {
	finish string
	calls  []*pendingCall // by the chunk's tool call index, in order met
}

type pendingCall struct {
	index    int
	id, name string
	args     strings.Builder
}

// Usage implements ClientStream.
func (s *GeminiStream) Usage() Usage { return s.usage }

func (s *GeminiStream) cand(i int) *geminiOut {
	c, ok := s.cands[i]
	if !ok {
		c = &geminiOut{}
		s.cands[i] = c
		s.order = append(s.order, i)
	}
	return c
}

func (c *geminiOut) flush() []gemini.Part {
	var parts []gemini.Part
	for _, pc := range c.calls {
		parts = append(parts, functionCallPart(pc.id, pc.name, pc.args.String()))
	}
	c.calls = nil
	return parts
}

func (s *GeminiStream) event(cands []gemini.Candidate, u *gemini.UsageMetadata) Event {
	return Event{Data: marshal(gemini.Response{Candidates: cands, UsageMetadata: u, ModelVersion: s.model, ResponseID: s.id})}
}

// Chunk implements ClientStream.
func (s *GeminiStream) Chunk(data []byte) ([]Event, error) {
	c, evs, ok, err := nextChunk(s, s.finished, data)
	if !ok {
		return evs, err
	}
	if s.id == "" {
		s.id = c.ID
	}
	if s.model == "" {
		s.model = c.Model
	}
	if c.Usage != nil {
		s.usage = usageFromOpenAI(c.Usage)
	}
	var cands []gemini.Candidate
	for _, ch := range c.Choices {
		st := s.cand(ch.Index)
		var parts []gemini.Part
		d := ch.Delta
		if th := strOr(d.ReasoningContent) + strOr(d.Reasoning); th != "" && s.includeThoughts {
			parts = append(parts, gemini.Part{Text: th, Thought: true})
		}
		if t := strOr(d.Content) + strOr(d.Refusal); t != "" {
			parts = append(parts, gemini.Part{Text: t})
		}
		for _, tc := range d.ToolCalls {
			var pc *pendingCall
			for _, p := range st.calls {
				if p.index == tc.Index {
					pc = p
				}
			}
			if pc == nil {
				pc = &pendingCall{index: tc.Index, id: tc.ID}
				st.calls = append(st.calls, pc)
			}
			if tc.Function.Name != "" {
				pc.name = tc.Function.Name
			}
			pc.args.WriteString(strOr(tc.Function.Arguments))
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			st.finish = *ch.FinishReason
			parts = append(parts, st.flush()...)
		}
		if len(parts) > 0 {
			cands = append(cands, gemini.Candidate{Content: &gemini.Content{Role: "model", Parts: parts}, Index: ch.Index})
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	return []Event{s.event(cands, nil)}, nil
}

// Finish implements ClientStream: the last event holds every
// candidate's finishReason (and any call not yet sent) and the usage.
func (s *GeminiStream) Finish() []Event {
	if s.finished {
		return nil
	}
	s.finished = true
	if len(s.order) == 0 {
		s.cand(0)
	}
	cands := make([]gemini.Candidate, 0, len(s.order))
	for _, i := range s.order {
		c := s.cands[i]
		finish := geminiFinishOf(c.finish)
		if finish == "" {
			finish = "STOP"
		}
		parts := c.flush()
		if parts == nil {
			parts = []gemini.Part{}
		}
		cands = append(cands, gemini.Candidate{Content: &gemini.Content{Role: "model", Parts: parts}, FinishReason: finish, Index: i})
	}
	return []Event{s.event(cands, geminiUsageOf(s.usage))}
}

// Fail implements ClientStream: Gemini ends a failed stream with an error
// object in place of the next event.
func (s *GeminiStream) Fail(status int, body []byte) []Event {
	if s.finished {
		return nil
	}
	s.finished = true
	return []Event{{Data: ErrorToGemini(status, body)}}
}

// GeminiArray frames stream events as the JSON array that
// streamGenerateContent returns without alt=sse: "[" before the first
// event, ",\r\n" between events, "]" at the end.
type GeminiArray struct{ n int }

// Item frames one event.
func (a *GeminiArray) Item(data []byte) []byte {
	sep := ",\r\n"
	if a.n == 0 {
		sep = "["
	}
	a.n++
	return append([]byte(sep), data...)
}

// Close ends the array.
func (a *GeminiArray) Close() []byte {
	if a.n == 0 {
		return []byte("[]")
	}
	return []byte("]")
}

// GoogleStatus names an HTTP status as a Google RPC status.
func GoogleStatus(status int) string {
	switch status {
	case 400, 411, 413, 422:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 402:
		return "FAILED_PRECONDITION"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 408, 504:
		return "DEADLINE_EXCEEDED"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 502, 503, 529:
		return "UNAVAILABLE"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// GeminiError is an error body in Google's shape:
// {"error":{"code":400,"message":"...","status":"INVALID_ARGUMENT"}}.
func GeminiError(status int, msg string) []byte {
	if msg == "" {
		msg = http.StatusText(status)
	}
	code := status
	if code == 529 {
		code = http.StatusServiceUnavailable // Google's codes are standard HTTP codes
	}
	return marshal(gemini.ErrorResponse{Error: gemini.ErrorBody{Code: code, Message: msg, Status: GoogleStatus(status)}})
}

// ErrorToGemini rewrites an error answer (OpenAI's or Anthropic's shape,
// or plain text) into Google's; a body already in Google's shape is
// returned as is.
func ErrorToGemini(status int, body []byte) []byte {
	var e gemini.ErrorResponse
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" && e.Error.Status != "" {
		return body
	}
	return GeminiError(status, errorMessage(body))
}

// GeminiBody is the refusal in Google's error shape.
func (e *FieldError) GeminiBody() []byte { return GeminiError(http.StatusBadRequest, e.Error()) }

// GeminiTokenCount is a countTokens answer.
func GeminiTokenCount(n int64) []byte { return marshal(gemini.CountTokensResponse{TotalTokens: n}) }
