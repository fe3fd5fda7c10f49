package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"switchboard/internal/api/openai"
)

// responsesFields is what FromResponses does with each Responses field.
var responsesFields = map[string]fieldRule{
	"model": mapped, "input": mapped, "instructions": mapped, "tools": mapped, "tool_choice": mapped,
	"parallel_tool_calls": mapped, "reasoning": mapped, "text": mapped, "max_output_tokens": mapped,
	"temperature": mapped, "top_p": mapped, "stream": mapped, "user": mapped, "background": mapped,
	"metadata": mapped, // echoed in the answer
	// OpenAI-side storage and caching, what to include in stored output,
	// client bookkeeping, a processing tier, log probabilities and the
	// hosted tools' call cap: none changes what the model is asked.
	"store": dropped, "include": dropped, "prompt_cache_key": dropped, "prompt_cache_retention": dropped,
	"prompt_cache_options": dropped, "client_metadata": dropped, "service_tier": dropped,
	"safety_identifier": dropped, "stream_options": dropped, "max_tool_calls": dropped,
	"top_logprobs": dropped, "context_management": dropped, "truncation": dropped,
}

var responsesRefusals = map[string]refusal{
	"previous_response_id": "needs the earlier response stored by the server that made it; send the whole conversation in input",
	"conversation":         "a stored conversation exists only at OpenAI; send the whole conversation in input",
	"prompt":               "a stored prompt template exists only at OpenAI",
}

// customSep joins a namespace to a tool's name in the internal form, where
// names must match ^[a-zA-Z0-9_-]+$ for every provider.
const customSep = "__"

// ResponsesInbound is an OpenAI Responses request translated into the
// internal form, with what its answer needs: the fields the Response
// object repeats, and how tool calls map back to the client's tools.
type ResponsesInbound struct {
	Inbound
	// Created stamps the answer (unix seconds) when the internal answer
	// carries no time; set by FromResponses.
	Created int64

	summary bool                // reasoning.summary asked for summaries
	tools   map[string]toolName // internal function name -> the client's tool
	echo    responsesEcho
}

// toolName is a client tool behind an internal function.
type toolName struct {
	name, namespace string
	custom          bool // a custom (free-form input) tool
}

// responsesEcho holds the request fields a Response repeats.
type responsesEcho struct {
	instructions, metadata, reasoning, text, toolChoice, tools json.RawMessage
	maxOutput                                                  *int64
	parallel                                                   bool
	temperature, topP                                          *float64
	truncation                                                 string
	user                                                       *string
}

// FromResponses translates an OpenAI Responses request (POST
// /v1/responses) into the internal form, for a provider that does not
// serve the Responses API itself. A *FieldError refuses the request; the
// answer comes back through Answer or Stream.
func FromResponses(body []byte) (*ResponsesInbound, error) {
	var d drops
	if err := classify(body, responsesFields, responsesRefusals, "the gateway's /v1/responses translation", &d); err != nil {
		return nil, err
	}
	var in openai.ResponsesRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, decodeErr(err)
	}
	if in.Background != nil && *in.Background {
		return nil, fieldErr("background", "a background response is stored and polled at OpenAI; send it in the foreground")
	}
	r := &ResponsesInbound{Created: time.Now().Unix(), tools: map[string]toolName{}}
	out := openai.ChatRequest{Model: in.Model, Stream: in.Stream, Temperature: in.Temperature, TopP: in.TopP,
		MaxTokens: in.MaxOutputTokens, ParallelToolCalls: in.ParallelToolCalls, User: in.User}
	if in.Stream {
		out.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	if rs := in.Reasoning; rs != nil {
		switch rs.Effort {
		case "", "none", "minimal", "low", "medium", "high", "xhigh":
			out.ReasoningEffort = rs.Effort
		default:
			return nil, fieldErr("reasoning.effort", "unknown value %q", rs.Effort)
		}
		s := rs.Summary
		if s == "" {
			s = rs.GenerateSummary
		}
		r.summary = s != "" && s != "none"
	}
	if err := responsesText(in.Text, &out, &d); err != nil {
		return nil, err
	}
	if err := r.chatTools(in.Tools, in.ToolChoice, &out, &d); err != nil {
		return nil, err
	}
	if present(in.Instructions) {
		var s string
		if err := json.Unmarshal(in.Instructions, &s); err != nil {
			return nil, fieldErr("instructions", "must be a string")
		}
		if s != "" {
			out.Messages = append(out.Messages, openai.Message{Role: "system", Content: marshal(s)})
		}
	}
	msgs, err := r.chatInput(in.Input, &d)
	if err != nil {
		return nil, err
	}
	out.Messages = append(out.Messages, msgs...)
	if len(msgs) == 0 {
		return nil, fieldErr("input", "required")
	}
	r.echo = echoOf(body, &in)
	r.Inbound = Inbound{Body: marshal(out), Model: in.Model, Stream: in.Stream, Dropped: d.list}
	return r, nil
}

// echoOf keeps what the Response object repeats, with the API's defaults.
func echoOf(body []byte, in *openai.ResponsesRequest) responsesEcho {
	var raw struct {
		Instructions json.RawMessage `json:"instructions"`
		Metadata     json.RawMessage `json:"metadata"`
		Tools        json.RawMessage `json:"tools"`
		ToolChoice   json.RawMessage `json:"tool_choice"`
		Text         json.RawMessage `json:"text"`
	}
	_ = json.Unmarshal(body, &raw)
	or := func(v json.RawMessage, def string) json.RawMessage {
		if present(v) {
			return v
		}
		return json.RawMessage(def)
	}
	e := responsesEcho{instructions: or(raw.Instructions, "null"), metadata: or(raw.Metadata, "{}"),
		tools: or(raw.Tools, "[]"), toolChoice: or(raw.ToolChoice, `"auto"`), maxOutput: in.MaxOutputTokens,
		parallel: in.ParallelToolCalls == nil || *in.ParallelToolCalls, temperature: in.Temperature, topP: in.TopP,
		truncation: "disabled"}
	if in.Truncation != "" {
		e.truncation = in.Truncation
	}
	if in.User != "" {
		e.user = ptr(in.User)
	}
	reasoning := map[string]*string{"effort": nil, "summary": nil}
	if rs := in.Reasoning; rs != nil {
		if rs.Effort != "" {
			reasoning["effort"] = ptr(rs.Effort)
		}
		if rs.Summary != "" {
			reasoning["summary"] = ptr(rs.Summary)
		}
	}
	e.reasoning = marshal(reasoning)
	text := map[string]any{"format": json.RawMessage(`{"type":"text"}`), "verbosity": "medium"}
	if t := in.Text; t != nil {
		if t.Format != nil {
			text["format"] = t.Format
		}
		if t.Verbosity != "" {
			text["verbosity"] = t.Verbosity
		}
	}
	e.text = marshal(text)
	return e
}

func responsesText(t *openai.ResponsesText, out *openai.ChatRequest, d *drops) error {
	if t == nil {
		return nil
	}
	if t.Verbosity != "" {
		d.add("text.verbosity") // how long the answer runs: a style hint
	}
	f := t.Format
	if f == nil {
		return nil
	}
	switch f.Type {
	case "", "text":
	case "json_object":
		out.ResponseFormat = &openai.ResponseFormat{Type: "json_object"}
	case "json_schema":
		if !present(f.Schema) {
			return fieldErr("text.format.schema", "required")
		}
		name := f.Name
		if name == "" {
			name = "response"
		}
		out.ResponseFormat = &openai.ResponseFormat{Type: "json_schema", JSONSchema: &openai.JSONSchema{Name: name,
			Description: f.Description, Schema: f.Schema, Strict: f.Strict}}
	default:
		return fieldErr("text.format.type", "unknown value %q", f.Type)
	}
	return nil
}

// hostedTools are the Responses API's server-side tools.
var hostedTools = map[string]bool{"file_search": true, "code_interpreter": true, "computer_use_preview": true,
	"computer": true, "image_generation": true, "mcp": true, "local_shell": true, "shell": true, "apply_patch": true,
	"programmatic_tool_calling": true, "web_search": true, "web_search_preview": true,
	"web_search_2025_08_26": true, "web_search_preview_2025_03_11": true}

func (r *ResponsesInbound) chatTools(tools []json.RawMessage, choice json.RawMessage, out *openai.ChatRequest, d *drops) error {
	for i, raw := range tools {
		f := fmt.Sprintf("tools[%d]", i)
		var t openai.ResponsesTool
		if err := json.Unmarshal(raw, &t); err != nil {
			return fieldErr(f, "must be a tool object")
		}
		switch {
		case t.Type == "function" || t.Type == "custom":
			if err := r.addTool(t, "", f, out, d); err != nil {
				return err
			}
		case t.Type == "namespace":
			if t.Name == "" {
				return fieldErr(f+".name", "required")
			}
			for j, inner := range t.Tools {
				ff := fmt.Sprintf("%s.tools[%d]", f, j)
				var it openai.ResponsesTool
				if err := json.Unmarshal(inner, &it); err != nil || it.Type != "function" && it.Type != "custom" {
					return fieldErr(ff+".type", "a namespace holds function and custom tools")
				}
				if err := r.addTool(it, t.Name, ff, out, d); err != nil {
					return err
				}
			}
		case t.Type == "tool_search":
			d.add(f) // deferred tools are all sent up front: nothing is left to search for
		case strings.HasPrefix(t.Type, "web_search") && t.ExternalWebAccess != nil && !*t.ExternalWebAccess:
			// Cache-only search exists only at OpenAI, and a live search
			// would break the client's no-fetch rule: the model answers
			// from what it knows, as when the cache holds nothing.
			d.add(f)
		case hostedTools[t.Type]:
			return fieldErr(f+".type", "hosted tool %q runs only on openai providers", t.Type)
		default:
			return fieldErr(f+".type", "unknown tool type %q", t.Type)
		}
	}
	return r.chatToolChoice(choice, out)
}

// addTool declares one function or custom tool. A custom tool (free-form
// input, e.g. Codex's apply_patch) becomes a function taking one string,
// "input"; its grammar is told to the model in the description, not
// enforced (the client checks what it receives).
func (r *ResponsesInbound) addTool(t openai.ResponsesTool, ns, field string, out *openai.ChatRequest, d *drops) error {
	if t.Name == "" {
		return fieldErr(field+".name", "required")
	}
	name := t.Name
	if ns != "" {
		name = ns + customSep + t.Name
	}
	if t.DeferLoading != nil {
		d.add(field + ".defer_loading")
	}
	fn := &openai.Function{Name: name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}
	if t.Type == "custom" {
		desc := "The raw input for the tool."
		if fm := t.Format; fm != nil && fm.Type == "grammar" {
			desc = fmt.Sprintf("The raw input for the tool, in this %s grammar:\n%s", fm.Syntax, fm.Definition)
			d.add(field + ".format")
		}
		fn.Parameters = marshal(map[string]any{"type": "object", "properties": map[string]any{
			"input": map[string]string{"type": "string", "description": desc}}, "required": []string{"input"},
			"additionalProperties": false})
	} else if !present(fn.Parameters) {
		fn.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	r.tools[name] = toolName{name: t.Name, namespace: ns, custom: t.Type == "custom"}
	out.Tools = append(out.Tools, openai.Tool{Type: "function", Function: fn})
	return nil
}

func (r *ResponsesInbound) chatToolChoice(raw json.RawMessage, out *openai.ChatRequest) error {
	if !present(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			out.ToolChoice = marshal(s)
			return nil
		}
		return fieldErr("tool_choice", "unknown value %q", s)
	}
	var o struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Mode  string `json:"mode"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return fieldErr("tool_choice", "must be a string or an object")
	}
	switch o.Type {
	case "function", "custom":
		if _, ok := r.tools[o.Name]; !ok {
			return fieldErr("tool_choice.name", "names no tool of tools")
		}
		c := openai.ToolChoiceObject{Type: "function"}
		c.Function.Name = o.Name
		out.ToolChoice = marshal(c)
	case "allowed_tools":
		if o.Mode != "auto" && o.Mode != "required" {
			return fieldErr("tool_choice.mode", `must be "auto" or "required"`)
		}
		allowed := map[string]bool{}
		for _, t := range o.Tools {
			allowed[t.Name] = true
		}
		var kept []openai.Tool
		for _, t := range out.Tools {
			if allowed[t.Function.Name] {
				kept = append(kept, t)
			}
		}
		if len(kept) != len(allowed) {
			return fieldErr("tool_choice.tools", "names a tool that tools does not declare")
		}
		out.Tools = kept // the model may not call the others
		out.ToolChoice = marshal(o.Mode)
	default:
		return fieldErr("tool_choice.type", "%q cannot be forced on a provider that is not openai", o.Type)
	}
	return nil
}

// chatInput maps input: a string is one user message; items become
// messages, consecutive assistant text and calls merging into one
// assistant message as the chat form wants.
func (r *ResponsesInbound) chatInput(raw json.RawMessage, d *drops) ([]openai.Message, error) {
	raw = bytes.TrimSpace(raw)
	if !present(raw) {
		return nil, fieldErr("input", "required")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fieldErr("input", "invalid string")
		}
		return []openai.Message{{Role: "user", Content: marshal(s)}}, nil
	}
	var items []openai.InputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fieldErr("input", "must be a string or an array of items")
	}
	var msgs []openai.Message
	var asst *openai.Message       // the assistant message being built
	var media []openai.ContentPart // tool outputs' images, for after the outputs
	endAssistant := func() {
		if asst != nil {
			if asst.Content == nil && len(asst.ToolCalls) == 0 {
				asst.Content = marshal("")
			}
			msgs = append(msgs, *asst)
			asst = nil
		}
	}
	// endOutputs places the tool outputs' media after the run of outputs:
	// a user message between tool messages would orphan those after it.
	endOutputs := func() {
		if len(media) > 0 {
			msgs = append(msgs, openai.Message{Role: "user", Content: marshal(media)})
			media = nil
		}
	}
	flush := func() {
		endAssistant()
		endOutputs()
	}
	assistant := func() *openai.Message {
		if asst == nil {
			endOutputs()
			asst = &openai.Message{Role: "assistant"}
		}
		return asst
	}
	for i, it := range items {
		f := fmt.Sprintf("input[%d]", i)
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			if it.Phase != "" {
				d.add(f + ".phase")
			}
			if it.Role == "assistant" {
				text, err := outputText(it.Content, f+".content")
				if err != nil {
					return nil, err
				}
				a := assistant()
				if len(a.ToolCalls) > 0 {
					endAssistant()
					a = assistant()
				}
				prev := ""
				if a.Content != nil {
					_ = json.Unmarshal(a.Content, &prev)
				}
				a.Content = marshal(prev + text)
				continue
			}
			flush()
			m, err := inputMessage(it, f)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		case "function_call", "custom_tool_call":
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + customSep + it.Name
			}
			args := it.Arguments
			if typ == "custom_tool_call" {
				args = string(marshal(map[string]string{"input": it.Input}))
			}
			if it.CallID == "" {
				return nil, fieldErr(f+".call_id", "required")
			}
			a := assistant()
			a.ToolCalls = append(a.ToolCalls, openai.ToolCall{ID: it.CallID, Type: "function",
				Function: openai.FunctionCall{Name: name, Arguments: args}})
		case "function_call_output", "custom_tool_call_output":
			endAssistant()
			if it.CallID == "" {
				return nil, fieldErr(f+".call_id", "required")
			}
			text, m, err := toolOutput(it.Output, f+".output")
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, openai.Message{Role: "tool", ToolCallID: it.CallID, Content: marshal(text)})
			if len(m) > 0 {
				media = append(media, openai.ContentPart{Type: "text", Text: "Attached to the result of tool call " + it.CallID + ":"})
				media = append(media, m...)
			}
		case "reasoning":
			// Encrypted for OpenAI only; a summary is not the reasoning.
			d.add(f)
		case "web_search_call", "tool_search_call", "tool_search_output":
			// A hosted search's record; its findings are in the messages.
			d.add(f)
		case "item_reference":
			return nil, fieldErr(f, "refers to an item stored at OpenAI; send the item itself")
		case "compaction":
			return nil, fieldErr(f, "a compaction item is encrypted for OpenAI; only an openai provider can read it")
		default:
			return nil, fieldErr(f+".type", "item type %q cannot be translated for a provider that is not openai", typ)
		}
	}
	flush()
	return msgs, nil
}

// inputMessage maps a user, system or developer message.
func inputMessage(it openai.InputItem, field string) (openai.Message, error) {
	role := it.Role
	switch role {
	case "user":
	case "system", "developer":
		role = "system"
	default:
		return openai.Message{}, fieldErr(field+".role", `must be "user", "assistant", "system" or "developer"`)
	}
	parts, err := inputParts(it.Content, field+".content")
	if err != nil {
		return openai.Message{}, err
	}
	if role == "system" {
		if _, err := textOnly(parts, field+".content"); err != nil {
			return openai.Message{}, err
		}
	}
	if len(parts) == 1 && parts[0].Type == "text" {
		return openai.Message{Role: role, Content: marshal(parts[0].Text)}, nil
	}
	if parts == nil {
		parts = []openai.ContentPart{}
	}
	return openai.Message{Role: role, Content: marshal(parts)}, nil
}

// inputParts reads message content: a string or input parts.
func inputParts(raw json.RawMessage, field string) ([]openai.ContentPart, error) {
	in, err := stringOrParts(raw, field, func(s string) openai.InputContent { return openai.InputContent{Type: "input_text", Text: s} })
	if err != nil || in == nil {
		return nil, err
	}
	out := make([]openai.ContentPart, 0, len(in))
	for j, c := range in {
		p, err := inputPart(c, fmt.Sprintf("%s[%d]", field, j))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func inputPart(c openai.InputContent, field string) (openai.ContentPart, error) {
	switch c.Type {
	case "input_text", "output_text", "text":
		return openai.ContentPart{Type: "text", Text: c.Text}, nil
	case "refusal":
		return openai.ContentPart{Type: "text", Text: c.Refusal}, nil
	case "input_image":
		if c.ImageURL == "" {
			return openai.ContentPart{}, fieldErr(field+".image_url", "required (file ids exist only at OpenAI)")
		}
		return openai.ContentPart{Type: "image_url", ImageURL: &openai.ImageURL{URL: c.ImageURL, Detail: c.Detail}}, nil
	case "input_file":
		if c.FileData == "" {
			return openai.ContentPart{}, fieldErr(field+".file_data", "required (file ids and file URLs are read by OpenAI only)")
		}
		data := c.FileData
		if !strings.HasPrefix(data, "data:") {
			data = "data:application/pdf;base64," + data
		}
		return openai.ContentPart{Type: "file", File: &openai.File{FileData: data, Filename: c.Filename}}, nil
	}
	return openai.ContentPart{}, fieldErr(field+".type", "content type %q cannot be translated", c.Type)
}

// outputText joins an assistant message's text (a string, or
// output_text and refusal parts).
func outputText(raw json.RawMessage, field string) (string, error) {
	parts, err := inputParts(raw, field)
	if err != nil {
		return "", err
	}
	return textOnly(parts, field)
}

// toolOutput reads a tool's output: a string, or parts whose text joins
// and whose images and files come back as media for a user message.
func toolOutput(raw json.RawMessage, field string) (string, []openai.ContentPart, error) {
	parts, err := inputParts(raw, field)
	if err != nil {
		return "", nil, err
	}
	var text []string
	var media []openai.ContentPart
	for _, p := range parts {
		if p.Type == "text" {
			text = append(text, p.Text)
		} else {
			media = append(media, p)
		}
	}
	return strings.Join(text, "\n"), media, nil
}
