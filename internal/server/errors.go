package server

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

// apiError is a gateway-made error. One writer turns it into the client's
// protocol.
type apiError struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration
	Detail     any
}

func errInvalid(msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_request", Message: msg}
}

// gatewayErrors is the vocabulary of the gateway's own OpenAI-shaped
// errors: every 5xx, 503 included, is a server_error.
var gatewayErrors = translate.ErrorTypes{Server: "server_error"}

func writeError(w http.ResponseWriter, proto Protocol, e *apiError) {
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
	_, _ = w.Write(errorBody(proto, e))
}

func errorBody(proto Protocol, e *apiError) []byte {
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

// failureDetail is the `detail` of an all-providers-failed error.
type failureDetail struct {
	Attempts    []proxy.Attempt `json:"attempts"`
	DeadlineHit bool            `json:"deadline_hit"`
	// Skipped are the model's providers never sent to (see untried).
	Skipped []proxy.Attempt `json:"skipped,omitempty"`
}

// writeFailure answers a loop that found no provider. A single provider's
// own error passes through untouched (status and body) when it was the
// only one the model could use; otherwise the client gets the gateway's
// summary with every attempt and every provider skipped.
//
// Provider keys (secrets) are masked in what passes through: an upstream
// may echo the request's Authorization header in its error.
func writeFailure(w http.ResponseWriter, proto Protocol, f *proxy.Failure, secrets *redact.Secrets, skipped []proxy.Attempt) {
	last := f.Last
	if last != nil && last.Status >= 400 && len(last.Body) > 0 && singleProvider(f.Attempts) && len(skipped) == 0 && jsoncheck.Valid(last.Body) &&
		gjson.GetBytes(last.Body, "error").Exists() {
		h := w.Header()
		copyUpstreamHeaders(h, last.Header)
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
	for i, a := range skipped {
		if i > 0 || len(f.Attempts) > 0 {
			b.WriteString("; ")
		}
		b.WriteString(a.Provider)
		b.WriteString(": ")
		b.WriteString(a.Reason)
	}
	if len(f.Attempts)+len(skipped) == 0 {
		b.WriteString("no provider was available")
	}
	if f.DeadlineHit {
		b.WriteString("; request deadline reached")
	}
	e := &apiError{Status: status, Type: gatewayErrors.For(status), Code: "all_failed", Message: b.String(),
		Detail: failureDetail{Attempts: f.Attempts, DeadlineHit: f.DeadlineHit, Skipped: skipped}}
	if status == 429 || status == 503 {
		if last != nil && last.Header != nil && last.Header.Get("Retry-After") != "" {
			w.Header().Set("Retry-After", secrets.String(last.Header.Get("Retry-After")))
		}
	}
	writeError(w, proto, e)
}

func singleProvider(a []proxy.Attempt) bool {
	for i := 1; i < len(a); i++ {
		if a[i].Provider != a[0].Provider {
			return false
		}
	}
	return len(a) > 0
}

// maxShown bounds what a client sent (a path, an id, a model name) where
// it is logged or echoed in an error: a request line may be up to 1 MB
// (net/http's header limit), which unbounded would be a 1 MB log line per
// request, unauthenticated ones included.
const maxShown = 256

// shown is s cut to maxShown bytes on a rune boundary, saying how long it was.
func shown(s string) string {
	if len(s) <= maxShown {
		return s
	}
	cut := maxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:cut], len(s))
}
