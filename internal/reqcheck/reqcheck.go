// Package reqcheck checks the fields of a client's request body that the
// gateway itself reads (to route, admit, price, estimate or translate it)
// before anything reads them, for every inbound protocol: each holds the
// kind of value the gateway relies on, and none has a twin that differs
// from it only by case. An upstream that decodes JSON case-insensitively
// (Go's encoding/json: Ollama, LocalAI and many self-hosted servers) would
// otherwise serve {"model": "chat", "MODEL": "big-model"} or a "Max_Tokens"
// the key was never admitted for.
package reqcheck

import (
	"fmt"

	"github.com/tidwall/gjson"

	"switchboard/internal/jsoncheck"
	"switchboard/internal/limit"
)

// Problem is a refused field: Param names it (a dotted path), Message
// says what is wrong in the client's terms.
type Problem struct{ Param, Message string }

// Endpoints, as the gateway names them (provider.Endpoint values).
const (
	Chat        = "chat/completions"
	Completions = "completions"
	Responses   = "responses"
	Embeddings  = "embeddings"
	Messages    = "messages" // Anthropic Messages
	Gemini      = "generateContent"
)

// Check checks body (a JSON object, parsed) sent to endpoint. A field
// that is absent or null is not checked: its absence is the upstream's
// to refuse (an OpenAI chat request without messages is its 400).
func Check(endpoint string, body gjson.Result) *Problem {
	spec := openAI
	switch endpoint {
	case Messages:
		spec = anthropic
	case Gemini:
		spec = gemini
	}
	if path, want, found := jsoncheck.CaseVariant(body, spec); found {
		return &Problem{Param: path, Message: fmt.Sprintf("%q differs only by case from %q, a field the gateway reads; "+
			"send each field once, spelled as the API spells it", path, want)}
	}
	var p *Problem
	body.ForEach(func(k, v gjson.Result) bool {
		p = checkField(endpoint, k.Str, v)
		return p == nil
	})
	return p
}

// wants says, per endpoint and field, what the value must be.
var wants = map[string]map[string]string{
	Chat:        {"messages": "an array"},
	Completions: {"prompt": "a string or an array"},
	Responses:   {"input": "a string or an array of input items", "instructions": "a string"},
	Embeddings:  {"input": "a string or an array"},
	Gemini:      {"contents": "an array of contents"},
}

// checkField checks one top-level field (null is absent).
func checkField(endpoint, name string, v gjson.Result) *Problem {
	if v.Type == gjson.Null {
		return nil
	}
	bad := func(want string) *Problem {
		return &Problem{Param: name, Message: fmt.Sprintf("%s: expected %s, got %s", name, want, kind(v))}
	}
	switch name {
	case "stream":
		if v.Type != gjson.True && v.Type != gjson.False {
			return bad("a boolean")
		}
	case "stream_options":
		if !v.IsObject() {
			return bad("an object")
		}
	case "max_tokens", "max_completion_tokens", "max_output_tokens":
		if _, ok := limit.UnsignedInt(v); !ok {
			return bad("a non-negative integer")
		}
	}
	want, checked := wants[endpoint][name]
	if !checked {
		return nil
	}
	switch {
	case endpoint == Chat && name == "messages":
		if !v.IsArray() {
			return bad(want)
		}
		var p *Problem
		n := 0
		v.ForEach(func(_, m gjson.Result) bool {
			if !m.IsObject() {
				at := fmt.Sprintf("messages.%d", n)
				p = &Problem{Param: at, Message: fmt.Sprintf("%s: expected a message object, got %s", at, kind(m))}
			}
			n++
			return p == nil
		})
		return p
	case name == "instructions":
		if v.Type != gjson.String {
			return bad(want)
		}
	case name == "contents":
		if !v.IsArray() {
			return bad(want)
		}
	default: // prompt, input
		if v.Type != gjson.String && !v.IsArray() {
			return bad(want)
		}
	}
	return nil
}

// kind names what v holds, for a message: a number or a string with its
// value (cut short).
func kind(v gjson.Result) string {
	shown := func(what string) string {
		raw := v.Raw
		if len(raw) > 40 {
			raw = raw[:40] + "..."
		}
		return what + " (" + raw + ")"
	}
	switch {
	case v.IsArray():
		return "an array"
	case v.IsObject():
		return "an object"
	case v.Type == gjson.String:
		return shown("a string")
	case v.Type == gjson.Number:
		return shown("a number")
	case v.Type == gjson.True || v.Type == gjson.False:
		return "a boolean"
	}
	return "null"
}
