package upstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode"
)

// geminiFields are generateContent's top-level fields (proto JSON takes
// both spellings); the real API refuses any other ("Unknown name").
var geminiFields = set("contents", "tools", "toolConfig", "safetySettings", "systemInstruction",
	"generationConfig", "cachedContent", "model")

// generationFields are generationConfig's fields.
var generationFields = set("stopSequences", "responseMimeType", "responseSchema", "responseJsonSchema",
	"_responseJsonSchema", "responseModalities", "candidateCount", "maxOutputTokens", "temperature", "topP",
	"topK", "seed", "presencePenalty", "frequencyPenalty", "responseLogprobs", "logprobs",
	"enableEnhancedCivicAnswers", "speechConfig", "thinkingConfig", "imageConfig", "mediaResolution")

// camel turns a snake_case proto field name into its JSON name.
func camel(k string) string {
	if !strings.Contains(k, "_") || strings.HasPrefix(k, "_") {
		return k
	}
	var b strings.Builder
	up := false
	for _, r := range k {
		if r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// field reads a proto JSON field by its camelCase name, in either spelling.
func field(m map[string]any, name string) any {
	if v, ok := m[name]; ok {
		return v
	}
	for k, v := range m {
		if camel(k) == name {
			return v
		}
	}
	return nil
}

// unknownProto is unknownField for proto JSON (both spellings).
func unknownProto(m map[string]any, allowed map[string]bool) string {
	for k := range m {
		if !allowed[camel(k)] {
			return k
		}
	}
	return ""
}

// gemini serves generateContent, streamGenerateContent, countTokens and the
// model list, under /v1beta and /v1.
func (s *Server) gemini(w http.ResponseWriter, r *http.Request) {
	k := r.Header.Get("X-Goog-Api-Key")
	if k == "" {
		k = r.URL.Query().Get("key")
	}
	if k == "" {
		k = bearer(r)
	}
	if k == "" {
		geminiError(w, http.StatusForbidden, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
		return
	}
	if !s.keyOK(k) {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
		return
	}
	path := r.URL.Path
	if !strings.HasPrefix(path, "/v1beta/") && !strings.HasPrefix(path, "/v1/") {
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "Not found: "+path)
		return
	}
	rest := path[strings.Index(path[1:], "/")+2:]
	if r.Method == http.MethodGet && rest == "models" {
		writeJSON(w, http.StatusOK, map[string]any{"models": []any{map[string]any{"name": "models/gemini-fake-1",
			"displayName": "Gemini Fake", "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
			"supportedGenerationMethods": []any{"generateContent", "countTokens"}}}})
		return
	}
	model, method, ok := strings.Cut(strings.TrimPrefix(rest, "models/"), ":")
	if r.Method != http.MethodPost || !ok || !strings.HasPrefix(rest, "models/") || model == "" {
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "Not found: "+r.Method+" "+path)
		return
	}
	body, _ := readBody(r)
	m, err := decodeObject(body)
	if err != nil {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. "+err.Error())
		return
	}
	switch method {
	case "countTokens":
		req := m
		if g, ok := field(m, "generateContentRequest").(map[string]any); ok {
			req = g
		}
		if _, err := geminiTurn(model, req); err != nil {
			geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": estimate(body),
			"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": estimate(body)}}})
	case "generateContent", "streamGenerateContent":
		s.generate(w, r, model, method == "streamGenerateContent", m, body)
	default:
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "Method not found: "+method)
	}
}

func geminiError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": code}})
}

// geminiTurn validates contents and tools as the real API does. For
// gemini-3 models it also enforces thought signatures: the first
// functionCall part of each model step of the current turn must carry a
// signature, else 400 (any non-empty one passes, as Google's documented
// "skip_thought_signature_validator" does for history from another model).
func geminiTurn(model string, m map[string]any) (turn, error) {
	var t turn
	if f := unknownProto(m, geminiFields); f != "" {
		return t, fmt.Errorf("Invalid JSON payload received. Unknown name %q: Cannot find field.", f)
	}
	gc, _ := field(m, "generationConfig").(map[string]any)
	if f := unknownProto(gc, generationFields); f != "" {
		return t, fmt.Errorf("Invalid JSON payload received. Unknown name %q at 'generation_config': Cannot find field.", f)
	}
	contents, _ := field(m, "contents").([]any)
	if len(contents) == 0 && field(m, "cachedContent") == nil {
		return t, fmt.Errorf("* GenerateContentRequest.contents: contents is not specified")
	}
	calls := 0     // functionCall parts of the previous model content
	turnStart := 0 // index of the user text that began the current turn
	for i, raw := range contents {
		c, ok := raw.(map[string]any)
		if !ok {
			return t, fmt.Errorf("Invalid value at 'contents[%d]': expected an object", i)
		}
		role := str(c, "role")
		if role != "" && role != "user" && role != "model" {
			return t, fmt.Errorf("Please use a valid role: user, model.")
		}
		parts := list(c["parts"])
		if len(parts) == 0 {
			return t, fmt.Errorf("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.", i)
		}
		responses, texts := 0, []string{}
		callsHere := 0
		for _, p := range parts {
			if fr, ok := field(p, "functionResponse").(map[string]any); ok {
				responses++
				t.toolResults = append(t.toolResults, text(fr["response"]))
			}
			if fc, ok := field(p, "functionCall").(map[string]any); ok {
				if role != "model" {
					return t, fmt.Errorf("Please ensure that function call turn comes immediately after a user turn or after a function response turn.")
				}
				if str(fc, "name") == "" {
					return t, fmt.Errorf("* GenerateContentRequest.contents[%d].parts: functionCall.name is required", i)
				}
				callsHere++
			}
			if tx, ok := p["text"].(string); ok && p["thought"] != true {
				texts = append(texts, tx)
			}
		}
		if responses > 0 {
			if calls == 0 {
				return t, fmt.Errorf("Please ensure that function response turn comes immediately after a function call turn.")
			}
			if responses != calls {
				return t, fmt.Errorf("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.")
			}
		}
		if role != "model" && responses == 0 && len(texts) > 0 {
			t.lastUser = strings.Join(texts, "\n")
			turnStart = i
		}
		calls = callsHere
	}
	if strings.HasPrefix(model, "gemini-3") {
		for i := turnStart; i < len(contents); i++ {
			c := contents[i].(map[string]any)
			if str(c, "role") != "model" {
				continue
			}
			for j, p := range list(c["parts"]) {
				fc, ok := field(p, "functionCall").(map[string]any)
				if !ok {
					continue
				}
				if sig, _ := field(p, "thoughtSignature").(string); sig == "" {
					return t, fmt.Errorf("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, "+
						"and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , position %d. "+
						"Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", str(fc, "name"), j+1)
				}
				break // only the first call of a step carries one
			}
		}
	}
	for _, tool := range list(field(m, "tools")) {
		for _, fd := range list(field(tool, "functionDeclarations")) {
			if str(fd, "name") == "" {
				return t, fmt.Errorf("* GenerateContentRequest.tools[0].function_declarations: name is required")
			}
			if field(fd, "parameters") != nil && field(fd, "parametersJsonSchema") != nil {
				return t, fmt.Errorf("parameters and parameters_json_schema cannot both be set")
			}
			t.offered = append(t.offered, str(fd, "name"))
		}
	}
	if mt, _ := field(gc, "responseMimeType").(string); mt == "application/json" {
		t.jsonMode = true
		for _, k := range []string{"responseJsonSchema", "_responseJsonSchema", "responseSchema"} {
			if sc := field(gc, k); sc != nil {
				t.jsonSchema = sc
				break
			}
		}
	}
	return t, nil
}

// generate answers generateContent and streamGenerateContent (?alt=sse:
// server-sent events; else one JSON array written as it grows).
func (s *Server) generate(w http.ResponseWriter, r *http.Request, model string, stream bool, m map[string]any, body []byte) {
	t, err := geminiTurn(model, m)
	if err != nil {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	if t.refused() {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "refused by the fake upstream ("+RefuseWord+")")
		return
	}
	rep := s.decide(t)
	gc, _ := field(m, "generationConfig").(map[string]any)
	tc, _ := field(gc, "thinkingConfig").(map[string]any)
	thoughts, _ := field(tc, "includeThoughts").(bool)
	in := estimate(body)
	respID := s.id("fake-resp-")
	// Each answer is a list of candidate chunks; the unary answer is their
	// parts merged.
	var steps [][]map[string]any
	if thoughts && !rep.json {
		steps = append(steps, []map[string]any{{"text": "Considering the request.", "thought": true}})
	}
	out := words(rep.text)
	if rep.call != nil {
		args := rep.call.Args
		if args == nil {
			args = map[string]any{}
		}
		steps = append(steps, []map[string]any{{"functionCall": map[string]any{"name": rep.call.Name, "args": args},
			"thoughtSignature": "c2lnLWZha2U="}})
		out = 20
	} else {
		n := 3
		if rep.json {
			n = 1
		}
		for _, c := range chunks(rep.text, n) {
			steps = append(steps, []map[string]any{{"text": c}})
		}
	}
	usage := func(final bool) map[string]any {
		u := map[string]any{"promptTokenCount": in,
			"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": in}}}
		if final {
			u["candidatesTokenCount"], u["totalTokenCount"] = out, in+out
			if thoughts {
				u["thoughtsTokenCount"] = 5
				u["totalTokenCount"] = in + out + 5
			}
		} else {
			u["totalTokenCount"] = in
		}
		return u
	}
	chunk := func(parts []map[string]any, final bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if final {
			cand["finishReason"] = "STOP"
		}
		return map[string]any{"candidates": []any{cand}, "usageMetadata": usage(final),
			"modelVersion": model, "responseId": respID}
	}
	if !stream {
		// One answer: the thought, then the text whole (or the call).
		var parts []map[string]any
		if thoughts && !rep.json {
			parts = append(parts, steps[0]...)
		}
		if rep.call != nil {
			parts = append(parts, steps[len(steps)-1]...)
		} else {
			parts = append(parts, map[string]any{"text": rep.text})
		}
		writeJSON(w, http.StatusOK, chunk(parts, true))
		return
	}
	if r.URL.Query().Get("alt") == "sse" {
		e := newSSE(w)
		for i, st := range steps {
			s.pause()
			e.event("", chunk(st, i == len(steps)-1), "\r\n\r\n")
		}
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	for i, st := range steps {
		s.pause()
		b, _ := json.MarshalIndent(chunk(st, i == len(steps)-1), "", "  ")
		sep := ",\r\n"
		if i == 0 {
			sep = "["
		}
		w.Write([]byte(sep))
		w.Write(b)
		if f != nil {
			f.Flush()
		}
	}
	w.Write([]byte("]"))
}
