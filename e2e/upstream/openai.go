package upstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// chatFields are the chat completions API's top-level fields; the real API
// refuses any other ("Unrecognized request argument supplied").
var chatFields = set("model", "messages", "audio", "frequency_penalty", "function_call", "functions",
	"logit_bias", "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n",
	"parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key", "prompt_cache_retention",
	"reasoning_effort", "response_format", "safety_identifier", "seed", "service_tier", "stop", "store",
	"stream", "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user",
	"verbosity", "web_search_options")

// openai serves chat completions, Responses and the model list under /v1.
func (s *Server) openai(w http.ResponseWriter, r *http.Request) {
	if !s.keyOK(bearer(r)) {
		openaiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "",
			"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.")
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": "gpt-fake-1", "object": "model", "created": 1767225600, "owned_by": "fake"}}})
		return
	}
	if r.Method != http.MethodPost || (r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/v1/responses") {
		openaiError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "",
			fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path))
		return
	}
	body, _ := readBody(r)
	m, err := decodeObject(body)
	if err != nil {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", "",
			"We could not parse the JSON body of your request. ("+err.Error()+")")
		return
	}
	if r.URL.Path == "/v1/responses" {
		s.responses(w, m, body)
		return
	}
	s.chat(w, m, body)
}

func openaiError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	w.Header().Set("X-Request-Id", "req_fake")
	writeJSON(w, status, map[string]any{"error": e})
}

// chatTurn validates a chat conversation as the real API does.
func chatTurn(m map[string]any) (turn, error) {
	var t turn
	if str(m, "model") == "" {
		return t, fmt.Errorf("you must provide a model parameter")
	}
	msgs, ok := m["messages"].([]any)
	if !ok || len(msgs) == 0 {
		return t, fmt.Errorf("[] is too short - 'messages'")
	}
	var pending map[string]bool // tool_call ids still owed a tool message
	for i, raw := range msgs {
		msg, ok := raw.(map[string]any)
		if !ok {
			return t, fmt.Errorf("Invalid type for 'messages[%d]': expected an object", i)
		}
		role := str(msg, "role")
		if role != "tool" && len(pending) > 0 {
			return t, fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "+
				"The following tool_call_ids did not have response messages: %s", keys(pending))
		}
		switch role {
		case "system", "developer", "user":
			if _, ok := msg["content"]; !ok {
				return t, fmt.Errorf("Missing required parameter: 'messages[%d].content'", i)
			}
			if role == "user" {
				t.lastUser = text(msg["content"])
			}
		case "assistant":
			pending = map[string]bool{}
			for j, c := range list(msg["tool_calls"]) {
				fn, _ := c["function"].(map[string]any)
				if str(c, "id") == "" || str(fn, "name") == "" {
					return t, fmt.Errorf("Missing required parameter: 'messages[%d].tool_calls[%d].id' or function name", i, j)
				}
				if _, ok := fn["arguments"].(string); !ok {
					return t, fmt.Errorf("Invalid type for 'messages[%d].tool_calls[%d].function.arguments': expected a string", i, j)
				}
				pending[str(c, "id")] = true
			}
		case "tool":
			id := str(msg, "tool_call_id")
			if !pending[id] {
				return t, fmt.Errorf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			delete(pending, id)
			t.toolResults = append(t.toolResults, text(msg["content"]))
		default:
			return t, fmt.Errorf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", role)
		}
	}
	if len(pending) > 0 {
		return t, fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "+
			"The following tool_call_ids did not have response messages: %s", keys(pending))
	}
	for i, tool := range list(m["tools"]) {
		switch str(tool, "type") {
		case "function":
			fn, _ := tool["function"].(map[string]any)
			if str(fn, "name") == "" {
				return t, fmt.Errorf("Missing required parameter: 'tools[%d].function.name'", i)
			}
			t.offered = append(t.offered, str(fn, "name"))
		case "custom":
			c, _ := tool["custom"].(map[string]any)
			t.offered = append(t.offered, str(c, "name"))
		default:
			return t, fmt.Errorf("Invalid value: '%s'. Supported values are: 'function' and 'custom'.", str(tool, "type"))
		}
	}
	if rf, ok := m["response_format"].(map[string]any); ok {
		switch str(rf, "type") {
		case "json_schema":
			js, _ := rf["json_schema"].(map[string]any)
			t.jsonMode, t.jsonSchema = true, js["schema"]
		case "json_object":
			t.jsonMode = true
		}
	}
	return t, nil
}

func keys(m map[string]bool) string {
	var l []string
	for k := range m {
		l = append(l, k)
	}
	return strings.Join(l, ", ")
}

// chat answers POST /v1/chat/completions.
func (s *Server) chat(w http.ResponseWriter, m map[string]any, body []byte) {
	if f := unknownField(m, chatFields); f != "" {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", f, "Unrecognized request argument supplied: "+f)
		return
	}
	stream, _ := m["stream"].(bool)
	if _, ok := m["stream_options"]; ok && !stream {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "invalid_value", "stream_options",
			"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		return
	}
	t, err := chatTurn(m)
	if err != nil {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", "messages", err.Error())
		return
	}
	if t.refused() {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "refused", "", "refused by the fake upstream ("+RefuseWord+")")
		return
	}
	rep := s.decide(t)
	model, in := str(m, "model"), estimate(body)
	id, created := s.id("chatcmpl-fake"), time.Now().Unix()
	out, finish := words(rep.text), "stop"
	var calls []any
	if rep.call != nil {
		args, _ := json.Marshal(rep.call.Args)
		if rep.call.Args == nil {
			args = []byte("{}")
		}
		calls = []any{map[string]any{"id": s.id("call_fake"), "type": "function",
			"function": map[string]any{"name": rep.call.Name, "arguments": string(args)}}}
		out, finish = 20, "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out,
		"prompt_tokens_details":     map[string]any{"cached_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0}}
	if !stream {
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
		if calls != nil {
			msg["tool_calls"] = calls
		} else {
			msg["content"] = rep.text
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": created,
			"model": model, "choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
			"usage": usage, "service_tier": "default", "system_fingerprint": "fp_fake"})
		return
	}
	so, _ := m["stream_options"].(map[string]any)
	withUsage, _ := so["include_usage"].(bool)
	e := newSSE(w)
	chunk := func(delta map[string]any, finish any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"service_tier": "default", "system_fingerprint": "fp_fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}}
		if withUsage {
			c["usage"] = nil
		}
		s.pause()
		e.event("", c, "\n\n")
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	if rep.call != nil {
		c := calls[0].(map[string]any)
		fn := c["function"].(map[string]any)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": c["id"], "type": "function",
			"function": map[string]any{"name": fn["name"], "arguments": ""}}}}, nil)
		for _, p := range chunks(fn["arguments"].(string), 3) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": p}}}}, nil)
		}
	} else {
		for _, p := range chunks(rep.text, 3) {
			chunk(map[string]any{"content": p}, nil)
		}
	}
	chunk(map[string]any{}, finish)
	if withUsage {
		e.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"service_tier": "default", "system_fingerprint": "fp_fake", "choices": []any{}, "usage": usage}, "\n\n")
	}
	e.event("", "[DONE]", "\n\n")
}
