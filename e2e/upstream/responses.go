package upstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// responsesFields are the Responses API's top-level fields; the real API
// refuses any other ("Unknown parameter").
var responsesFields = set("model", "input", "instructions", "background", "conversation", "include",
	"max_output_tokens", "max_tool_calls", "metadata", "parallel_tool_calls", "previous_response_id",
	"prompt", "prompt_cache_key", "prompt_cache_retention", "reasoning", "safety_identifier", "service_tier",
	"store", "stream", "stream_options", "temperature", "text", "tool_choice", "tools", "top_logprobs",
	"top_p", "truncation", "user", "client_metadata", "context_management")

// responsesTurn validates a Responses input as the real API does.
func responsesTurn(m map[string]any) (turn, error) {
	var t turn
	if str(m, "model") == "" {
		return t, fmt.Errorf("Missing required parameter: 'model'.")
	}
	chained := str(m, "previous_response_id") != ""
	calls := map[string]bool{}
	switch in := m["input"].(type) {
	case string:
		t.lastUser = in
	case []any:
		for i, raw := range in {
			item, ok := raw.(map[string]any)
			if !ok {
				return t, fmt.Errorf("Invalid type for 'input[%d]': expected an object", i)
			}
			typ := str(item, "type")
			if typ == "" && str(item, "role") != "" {
				typ = "message"
			}
			switch typ {
			case "message":
				switch role := str(item, "role"); role {
				case "user":
					t.lastUser = text(item["content"])
				case "system", "developer", "assistant":
				default:
					return t, fmt.Errorf("Invalid value: '%s'. Supported values are: 'assistant', 'system', 'developer', and 'user'.", role)
				}
			case "function_call", "custom_tool_call", "local_shell_call":
				if str(item, "call_id") == "" {
					return t, fmt.Errorf("Missing required parameter: 'input[%d].call_id'.", i)
				}
				calls[str(item, "call_id")] = true
			case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
				id := str(item, "call_id")
				if !calls[id] && !chained {
					return t, fmt.Errorf("No tool call found for function call output with call_id %s.", id)
				}
				t.toolResults = append(t.toolResults, text(item["output"]))
			case "reasoning", "item_reference", "web_search_call", "compaction", "tool_search_call", "tool_search_output":
			default:
				return t, fmt.Errorf("Invalid value: '%s' for 'input[%d].type'.", typ, i)
			}
		}
	case nil:
		if !chained {
			return t, fmt.Errorf("Missing required parameter: 'input'.")
		}
	default:
		return t, fmt.Errorf("Invalid type for 'input': expected a string or an array of input items.")
	}
	for i, tool := range list(m["tools"]) {
		switch str(tool, "type") {
		case "function", "custom":
			if str(tool, "name") == "" {
				return t, fmt.Errorf("Missing required parameter: 'tools[%d].name'.", i)
			}
			t.offered = append(t.offered, str(tool, "name"))
		case "":
			return t, fmt.Errorf("Missing required parameter: 'tools[%d].type'.", i)
		}
	}
	if tx, ok := m["text"].(map[string]any); ok {
		if f, ok := tx["format"].(map[string]any); ok {
			switch str(f, "type") {
			case "json_schema":
				t.jsonMode, t.jsonSchema = true, f["schema"]
			case "json_object":
				t.jsonMode = true
			}
		}
	}
	return t, nil
}

// responses answers POST /v1/responses.
func (s *Server) responses(w http.ResponseWriter, m map[string]any, body []byte) {
	if f := unknownField(m, responsesFields); f != "" {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "unknown_parameter", f, "Unknown parameter: '"+f+"'.")
		return
	}
	t, err := responsesTurn(m)
	if err != nil {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "", "input", err.Error())
		return
	}
	if t.refused() {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "refused", "", "refused by the fake upstream ("+RefuseWord+")")
		return
	}
	rep := s.decide(t)
	in := estimate(body)
	var output []map[string]any
	reasoning, _ := m["reasoning"].(map[string]any)
	if reasoning != nil {
		r := map[string]any{"id": s.id("rs_fake"), "type": "reasoning", "summary": []any{}}
		inc, _ := m["include"].([]any)
		if slices.Contains(inc, any("reasoning.encrypted_content")) {
			r["encrypted_content"] = "enc-fake"
		}
		output = append(output, r)
	}
	out := words(rep.text)
	if rep.call != nil {
		args, _ := json.Marshal(rep.call.Args)
		if rep.call.Args == nil {
			args = []byte("{}")
		}
		output = append(output, map[string]any{"id": s.id("fc_fake"), "type": "function_call", "status": "completed",
			"call_id": s.id("call_fake"), "name": rep.call.Name, "arguments": string(args)})
		out = 20
	} else {
		output = append(output, map[string]any{"id": s.id("msg_fake"), "type": "message", "status": "completed",
			"role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": rep.text,
				"annotations": []any{}, "logprobs": []any{}}}})
	}
	resp := map[string]any{"id": s.id("resp_fake"), "object": "response", "created_at": time.Now().Unix(),
		"status": "completed", "background": false, "error": nil, "incomplete_details": nil,
		"instructions": m["instructions"], "max_output_tokens": m["max_output_tokens"], "model": str(m, "model"),
		"output": output, "parallel_tool_calls": true, "previous_response_id": m["previous_response_id"],
		"reasoning": map[string]any{"effort": reasoning["effort"], "summary": nil}, "store": m["store"] != false,
		"temperature": 1.0, "text": map[string]any{"format": map[string]any{"type": "text"}}, "tool_choice": "auto",
		"tools": []any{}, "top_p": 1.0, "truncation": "disabled", "user": nil, "metadata": map[string]any{},
		"usage": map[string]any{"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": in + out}}
	if stream, _ := m["stream"].(bool); !stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	s.responsesStream(w, resp, output)
}

// responsesStream writes the Responses event sequence, every event with
// its sequence_number: response.created, response.in_progress, then per
// output item output_item.added, its deltas (content_part.added,
// output_text.delta..., output_text.done, content_part.done; or
// function_call_arguments.delta..., .done) and output_item.done, then
// response.completed with the whole response and its usage.
func (s *Server) responsesStream(w http.ResponseWriter, resp map[string]any, output []map[string]any) {
	e := newSSE(w)
	seq := 0
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		s.pause()
		e.event(typ, fields, "\n\n")
	}
	start := map[string]any{}
	for k, v := range resp {
		start[k] = v
	}
	start["status"], start["output"], start["usage"] = "in_progress", []any{}, nil
	emit("response.created", map[string]any{"response": start})
	emit("response.in_progress", map[string]any{"response": start})
	for i, item := range output {
		id := str(item, "id")
		switch str(item, "type") {
		case "reasoning":
			emit("response.output_item.added", map[string]any{"output_index": i,
				"item": map[string]any{"id": id, "type": "reasoning", "summary": []any{}}})
		case "message":
			emit("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{"id": id,
				"type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
			part := item["content"].([]any)[0].(map[string]any)
			emit("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}})
			for _, c := range chunks(str(part, "text"), 3) {
				emit("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
					"delta": c, "logprobs": []any{}})
			}
			emit("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"text": part["text"], "logprobs": []any{}})
			emit("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": part})
		case "function_call":
			emit("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{"id": id,
				"type": "function_call", "status": "in_progress", "call_id": item["call_id"], "name": item["name"], "arguments": ""}})
			for _, c := range chunks(str(item, "arguments"), 3) {
				emit("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": c})
			}
			emit("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i,
				"name": item["name"], "arguments": item["arguments"]})
		}
		emit("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	emit("response.completed", map[string]any{"response": resp})
}
