package upstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// anthropicFields are the Messages API's top-level fields; the real API
// refuses any other ("Extra inputs are not permitted").
var anthropicFields = set("model", "messages", "max_tokens", "metadata", "stop_sequences", "stream",
	"system", "temperature", "thinking", "tool_choice", "tools", "top_k", "top_p", "context_management",
	"output_config", "service_tier", "container", "mcp_servers", "inference_geo", "cache_control")

// countFields are those of /v1/messages/count_tokens.
var countFields = set("model", "messages", "system", "tools", "tool_choice", "thinking",
	"context_management", "output_config", "mcp_servers", "cache_control")

// anthropic serves the Messages API under /v1.
func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	k := r.Header.Get("X-Api-Key")
	if k == "" {
		k = bearer(r)
	}
	if !s.keyOK(k) {
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{map[string]any{"type": "model",
			"id": "claude-fake-1", "display_name": "Claude Fake", "created_at": "2026-01-01T00:00:00Z"}},
			"has_more": false, "first_id": "claude-fake-1", "last_id": "claude-fake-1"})
		return
	case r.Method != http.MethodPost:
		anthropicError(w, http.StatusNotFound, "not_found_error", "Not found")
		return
	case r.Header.Get("Anthropic-Version") == "":
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	body, _ := readBody(r)
	m, err := decodeObject(body)
	if err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	switch r.URL.Path {
	case "/v1/messages":
		s.messages(w, m, body)
	case "/v1/messages/count_tokens":
		if f := unknownField(m, countFields); f != "" {
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", f+": Extra inputs are not permitted")
			return
		}
		if _, err := anthropicTurn(m); err != nil {
			anthropicError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": estimate(body)})
	default:
		anthropicError(w, http.StatusNotFound, "not_found_error", "Not found")
	}
}

func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Request-Id", "req_fake")
	writeJSON(w, status, map[string]any{"type": "error",
		"error": map[string]any{"type": typ, "message": msg}, "request_id": "req_fake"})
}

// anthropicTurn validates the conversation as the real API does and reads
// what the fake model needs from it.
func anthropicTurn(m map[string]any) (turn, error) {
	var t turn
	if str(m, "model") == "" {
		return t, fmt.Errorf("model: Field required")
	}
	msgs, ok := m["messages"].([]any)
	if !ok || len(msgs) == 0 {
		return t, fmt.Errorf("messages: Field required (a non-empty list)")
	}
	var pending map[string]bool // tool_use ids of the previous assistant message
	for i, raw := range msgs {
		msg, ok := raw.(map[string]any)
		if !ok {
			return t, fmt.Errorf("messages.%d: Input should be a valid dictionary", i)
		}
		role := str(msg, "role")
		// The API takes a system entry inside messages (Claude Code sends one).
		if role != "user" && role != "assistant" && role != "system" {
			return t, fmt.Errorf("messages.%d.role: Input should be 'user', 'assistant' or 'system'", i)
		}
		var blocks []map[string]any
		switch c := msg["content"].(type) {
		case string:
			blocks = []map[string]any{{"type": "text", "text": c}}
		case []any:
			blocks = list(c)
			if len(blocks) != len(c) {
				return t, fmt.Errorf("messages.%d.content: every block must be an object", i)
			}
		default:
			return t, fmt.Errorf("messages.%d.content: Field required", i)
		}
		uses := map[string]bool{}
		var userText []string
		for j, b := range blocks {
			typ := str(b, "type")
			switch typ {
			case "":
				return t, fmt.Errorf("messages.%d.content.%d.type: Field required", i, j)
			case "tool_use", "server_tool_use", "mcp_tool_use":
				if role != "assistant" {
					return t, fmt.Errorf("messages.%d.content.%d: tool_use blocks are only allowed in assistant messages", i, j)
				}
				if str(b, "id") == "" || str(b, "name") == "" {
					return t, fmt.Errorf("messages.%d.content.%d: tool_use needs an id and a name", i, j)
				}
				if _, ok := b["input"].(map[string]any); !ok {
					return t, fmt.Errorf("messages.%d.content.%d.tool_use.input: Input should be a valid dictionary", i, j)
				}
				uses[str(b, "id")] = true
			case "tool_result":
				id := str(b, "tool_use_id")
				if !pending[id] {
					return t, fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. "+
						"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, id)
				}
				delete(pending, id)
				t.toolResults = append(t.toolResults, text(b["content"]))
			case "text":
				if _, ok := b["text"].(string); !ok {
					return t, fmt.Errorf("messages.%d.content.%d.text: Field required", i, j)
				}
				userText = append(userText, str(b, "text"))
			}
		}
		if len(pending) > 0 {
			ids := make([]string, 0, len(pending))
			for id := range pending {
				ids = append(ids, id)
			}
			return t, fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. "+
				"Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i-1, strings.Join(ids, ", "))
		}
		pending = uses
		if role == "user" && len(userText) > 0 {
			t.lastUser = strings.Join(userText, "\n")
		}
	}
	for i, tool := range list(m["tools"]) {
		name := str(tool, "name")
		if name == "" {
			return t, fmt.Errorf("tools.%d.name: Field required", i)
		}
		if typ := str(tool, "type"); typ == "" || typ == "custom" {
			if _, ok := tool["input_schema"].(map[string]any); !ok {
				return t, fmt.Errorf("tools.%d.custom.input_schema: Field required", i)
			}
		}
		t.offered = append(t.offered, name)
	}
	return t, nil
}

// messages answers POST /v1/messages.
func (s *Server) messages(w http.ResponseWriter, m map[string]any, body []byte) {
	if f := unknownField(m, anthropicFields); f != "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", f+": Extra inputs are not permitted")
		return
	}
	maxTokens, ok := integer(m["max_tokens"])
	if !ok || maxTokens < 1 {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required (an integer of at least 1)")
		return
	}
	t, err := anthropicTurn(m)
	if err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	thinking, _ := m["thinking"].(map[string]any)
	switch typ := str(thinking, "type"); typ {
	case "", "disabled", "adaptive":
	case "enabled":
		b, _ := integer(thinking["budget_tokens"])
		if b < 1024 || b >= maxTokens {
			anthropicError(w, http.StatusBadRequest, "invalid_request_error",
				"thinking.enabled.budget_tokens: Input should be at least 1024 and less than max_tokens")
			return
		}
	default:
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'")
		return
	}
	if t.refused() {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "refused by the fake upstream ("+RefuseWord+")")
		return
	}
	rep := s.decide(t)
	think := str(thinking, "type") == "enabled" || str(thinking, "type") == "adaptive"
	omitted := str(thinking, "display") == "omitted"
	model, in := str(m, "model"), estimate(body)
	id := s.id("msg_fake")
	if stream, _ := m["stream"].(bool); stream {
		s.messagesStream(w, id, model, in, rep, think, omitted)
		return
	}
	var content []any
	if think {
		th := "Considering the request."
		if omitted {
			th = ""
		}
		content = append(content, map[string]any{"type": "thinking", "thinking": th, "signature": "sig-fake-" + id})
	}
	stop, out := "end_turn", 0
	if rep.call != nil {
		args := rep.call.Args
		if args == nil {
			args = map[string]any{}
		}
		content = append(content, map[string]any{"type": "tool_use", "id": s.id("toolu_fake"), "name": rep.call.Name, "input": args})
		stop, out = "tool_use", 20
	} else {
		content = append(content, map[string]any{"type": "text", "text": rep.text})
		out = words(rep.text)
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": anthropicUsage(in, out)})
}

func anthropicUsage(in, out int) map[string]any {
	return map[string]any{"input_tokens": in, "output_tokens": out, "cache_creation_input_tokens": 0,
		"cache_read_input_tokens": 0, "service_tier": "standard"}
}

// messagesStream writes the Messages event sequence: message_start, ping,
// per block content_block_start / content_block_delta... /
// content_block_stop, then message_delta with the stop reason and usage,
// then message_stop.
func (s *Server) messagesStream(w http.ResponseWriter, id, model string, in int, rep reply, think, omitted bool) {
	e := newSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(in, 1)}}, "\n\n")
	e.event("ping", map[string]any{"type": "ping"}, "\n\n")
	idx := 0
	block := func(start map[string]any, deltas []map[string]any) {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": start}, "\n\n")
		for _, d := range deltas {
			s.pause()
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": d}, "\n\n")
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx}, "\n\n")
		idx++
	}
	if think {
		var d []map[string]any
		if !omitted {
			for _, c := range chunks("Considering the request.", 2) {
				d = append(d, map[string]any{"type": "thinking_delta", "thinking": c})
			}
		}
		d = append(d, map[string]any{"type": "signature_delta", "signature": "sig-fake-" + id})
		block(map[string]any{"type": "thinking", "thinking": "", "signature": ""}, d)
	}
	stop, out := "end_turn", 0
	if rep.call != nil {
		args, _ := json.Marshal(rep.call.Args)
		if rep.call.Args == nil {
			args = []byte("{}")
		}
		var d []map[string]any
		for _, c := range chunks(string(args), 3) {
			d = append(d, map[string]any{"type": "input_json_delta", "partial_json": c})
		}
		block(map[string]any{"type": "tool_use", "id": s.id("toolu_fake"), "name": rep.call.Name, "input": map[string]any{}}, d)
		stop, out = "tool_use", 20
	} else {
		var d []map[string]any
		for _, c := range chunks(rep.text, 3) {
			d = append(d, map[string]any{"type": "text_delta", "text": c})
		}
		block(map[string]any{"type": "text", "text": ""}, d)
		out = words(rep.text)
	}
	e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": out}}, "\n\n")
	e.event("message_stop", map[string]any{"type": "message_stop"}, "\n\n")
}
