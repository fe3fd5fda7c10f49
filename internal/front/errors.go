// Package front is what every plane of the gateway shares with its
// clients: the client's protocol and the one error writer (a whole answer,
// or the end of a stream that failed after it started), the other answer
// writers (JSON, a unary answer flushed at once, a stream's head, the 404
// of an unknown path), the upstream headers a client may see, a bounded
// copy of an answer for whoever stores it, and what a request brings: its
// id, the key it presents, its body read within bounds. Handler is the
// shape of a plane's handler: the server's auth hands it the config
// snapshot and the caller's identity. It holds no state. Package server
// (routes, middleware, auth) and the planes (inference, operator,
// dispatch) call it; it calls nothing of theirs.
package front

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"switchboard/internal/translate"
)

// Protocol is the client's wire protocol, which decides the error shape.
type Protocol int

const (
	// OpenAI: {"error":{"message","type","param","code"}}.
	OpenAI Protocol = iota
	// Anthropic: {"type":"error","error":{"type","message"}}.
	Anthropic
	// Gemini: {"error":{"code","message","status"}} (Google's shape).
	Gemini
)

// Error is a gateway-made error. One writer turns it into the client's
// protocol.
type Error struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration
	Detail     any
}

// Invalid is a 400 invalid_request error saying msg.
func Invalid(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_request", Message: msg}
}

// GatewayErrors is the vocabulary of the gateway's own OpenAI-shaped
// errors: every 5xx, 503 included, is a server_error.
var GatewayErrors = translate.ErrorTypes{Server: "server_error"}

// WriteError writes e in proto's error shape, with Retry-After on every
// refusal that asks the client to come back. It is the one place a
// gateway-made error is written.
func WriteError(w http.ResponseWriter, proto Protocol, e *Error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	} else if (e.Status == 429 || e.Status == 503) && h.Get("Retry-After") == "" {
		// Every gateway refusal tells the client when to come back.
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(ErrorBody(proto, e))
}

// ErrorBody is e as a JSON body in proto's error shape.
func ErrorBody(proto Protocol, e *Error) []byte {
	if proto == Gemini {
		return translate.GeminiError(e.Status, e.Message)
	}
	if proto == Anthropic {
		inner := map[string]any{"type": translate.AnthropicErrors.For(e.Status), "message": e.Message}
		if e.Detail != nil {
			// An extra member: the Anthropic SDKs keep the whole body on
			// their error, so the attempts reach a Messages client too.
			inner["detail"] = e.Detail
		}
		b, _ := json.Marshal(map[string]any{"type": "error", "error": inner})
		return b
	}
	inner := map[string]any{"message": e.Message, "type": e.Type, "param": nil, "code": nil}
	if e.Param != "" {
		inner["param"] = e.Param
	}
	if e.Code != "" {
		inner["code"] = e.Code
	}
	if e.Detail != nil {
		inner["detail"] = e.Detail
	}
	b, _ := json.Marshal(map[string]any{"error": inner})
	return b
}

// MaxShown bounds what a client sent (a path, an id, a model name) where
// it is logged or echoed in an error: a request line may be up to 1 MB
// (net/http's header limit), which unbounded would be a 1 MB log line per
// request, unauthenticated ones included.
const MaxShown = 256

// Shown is s cut to MaxShown bytes on a rune boundary, saying how long it was.
func Shown(s string) string {
	if len(s) <= MaxShown {
		return s
	}
	cut := MaxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:cut], len(s))
}
