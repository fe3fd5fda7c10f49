// Package front is what every plane of the gateway shares with its clients:
// the client's protocol and the one error writer (a whole answer or the end
// of a stream that failed after it started), the other answer writers
// (JSON, a unary answer flushed at once, a stream's head), the upstream
// headers a client may see, and what a request brings: its id, the key it
// presents, its body read within bounds. It holds no handler and no state:
// package server (routes, middleware, auth) and the planes below it
// (inference, operator, dispatch) call it; it calls nothing of theirs.
package front

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"switchboard/internal/jsoncheck"
	"switchboard/internal/proxy"
	"switchboard/internal/redact"
	"switchboard/internal/translate"
)

// Protocol is the client's wire protocol, which decides the error shape.
type Protocol int

const (
	// OpenAI: {"error":{"message","type","param","code"}}.
	OpenAI Protocol = iota
	// Anthropic: {"type":"error","error":{"type","message"}}.
	Anthropic
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

// FailureDetail is the `detail` of an all-providers-failed error.
type FailureDetail struct {
	Attempts    []proxy.Attempt `json:"attempts"`
	DeadlineHit bool            `json:"deadline_hit"`
}

// WriteFailure answers a loop that found no provider. A single provider's
// own error passes through untouched (status and body); otherwise the
// client gets the gateway's summary with every attempt.
//
// Provider keys (secrets) are masked in what passes through: an upstream
// may echo the request's Authorization header in its error.
func WriteFailure(w http.ResponseWriter, proto Protocol, f *proxy.Failure, secrets *redact.Secrets) {
	last := f.Last
	if last != nil && last.Status >= 400 && len(last.Body) > 0 && singleProvider(f.Attempts) && jsoncheck.Valid(last.Body) &&
		gjson.GetBytes(last.Body, "error").Exists() {
		h := w.Header()
		CopyUpstreamHeaders(h, last.Header)
		secrets.Header(h)
		h.Set("Content-Type", "application/json")
		body := secrets.Bytes(last.Body)
		if proto == Anthropic && gjson.GetBytes(body, "type").String() != "error" {
			body = translate.ErrorToAnthropic(last.Status, body)
		}
		w.WriteHeader(last.Status)
		_, _ = w.Write(body)
		return
	}
	status := http.StatusBadGateway
	if last != nil && last.Status >= 400 && last.Status <= 599 {
		status = last.Status
	}
	if f.DeadlineHit && status == http.StatusBadGateway {
		status = http.StatusGatewayTimeout
	}
	var b strings.Builder
	b.WriteString("All providers failed: ")
	for i, a := range f.Attempts {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(a.Provider)
		b.WriteString(": ")
		b.WriteString(a.Reason)
		if a.Status != 0 {
			b.WriteString(" (status=")
			b.WriteString(strconv.Itoa(a.Status))
			b.WriteString(")")
		}
	}
	if len(f.Attempts) == 0 {
		b.WriteString("no provider was available")
	}
	if f.DeadlineHit {
		b.WriteString("; request deadline reached")
	}
	e := &Error{Status: status, Type: GatewayErrors.For(status), Code: "all_failed", Message: b.String(),
		Detail: FailureDetail{Attempts: f.Attempts, DeadlineHit: f.DeadlineHit}}
	if status == 429 || status == 503 {
		if last != nil && last.Header != nil && last.Header.Get("Retry-After") != "" {
			w.Header().Set("Retry-After", secrets.String(last.Header.Get("Retry-After")))
		}
	}
	WriteError(w, proto, e)
}

func singleProvider(a []proxy.Attempt) bool {
	for i := 1; i < len(a); i++ {
		if a[i].Provider != a[0].Provider {
			return false
		}
	}
	return len(a) > 0
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
