package front

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"switchboard/internal/provider"
	"switchboard/internal/sse"
)

// MethodNotAllowed answers 405 naming the methods allow lists.
func MethodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	WriteError(w, ProtocolOf(r), &Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
		Code: "method_not_allowed", Message: fmt.Sprintf("method %s is not allowed on %s; use %s", Shown(r.Method), Shown(r.URL.Path), allow)})
}

// WriteJSON writes v as a JSON answer with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, OpenAI, &Error{Status: 500, Type: "server_error", Message: "cannot encode response"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// hopHeaders are upstream headers that describe the upstream connection or
// the upstream's encoding, not the answer: never relayed.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
	"Content-Encoding": true, "Set-Cookie": true, "Date": true, "Server": true, "Alt-Svc": true,
	"Strict-Transport-Security": true, "X-Request-Id": true,
}

// HopHeader reports an upstream header (canonical name) that is never
// relayed to a client.
func HopHeader(name string) bool { return hopHeaders[name] }

// CopyUpstreamHeaders relays the provider's headers (its rate-limit and
// Retry-After headers included, untouched); the upstream's request id is
// renamed so it does not clobber ours.
func CopyUpstreamHeaders(dst, src http.Header) {
	for k, v := range src {
		if hopHeaders[k] || strings.HasPrefix(k, "Cf-") {
			continue
		}
		dst[k] = v
	}
	if id := src.Get("X-Request-Id"); id != "" {
		dst.Set("X-Upstream-Request-Id", id)
	}
}

// WriteUnary writes a whole JSON answer and flushes it with its length, so
// the client has it before the bookkeeping after it (logs, releases) runs;
// net/http would otherwise hold the bytes until the handler returns. The
// request is counted in the metrics just before the flush.
func WriteUnary(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = provider.JSONType
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
	if a, ok := w.(interface{ Answered() }); ok {
		a.Answered()
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// StartStream writes the head of an SSE answer.
func StartStream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// EndFailedStream ends a stream that failed after it started with the
// error event of the client's protocol (then [DONE] where it has one).
func EndFailedStream(sw *sse.Writer, proto Protocol, ep provider.Endpoint, msg string) {
	switch {
	case proto == Anthropic:
		_ = sw.Event("error", ErrorBody(Anthropic, &Error{Status: http.StatusBadGateway, Message: msg}))
	case proto == Gemini:
		// Gemini ends a failed stream with an error object as the next event.
		_ = sw.Data(ErrorBody(Gemini, &Error{Status: http.StatusBadGateway, Message: msg}))
	case ep == provider.Responses:
		_ = sw.Event("response.failed", ResponsesFailed("upstream_stopped", msg))
		_ = sw.Done()
	default:
		_ = sw.Data(ErrorBody(OpenAI, &Error{Type: "server_error", Code: "upstream_error", Message: msg}))
		_ = sw.Done()
	}
}

// ResponsesFailed is the data of a Responses response.failed event.
func ResponsesFailed(code, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "response.failed", "response": map[string]any{
		"object": "response", "status": "failed", "error": map[string]any{"code": code, "message": msg}}})
	return b
}

// AnswerBuffer keeps a copy of an answer's body up to Limit bytes, for
// whoever stores or forwards the answer after it was written (an
// Idempotency-Key's record, a queued job's result). An answer that
// outgrows the limit is dropped whole, never kept in part: what is kept
// is the complete body or nothing, and no answer costs more than Limit.
type AnswerBuffer struct {
	Limit int64
	buf   []byte
	over  bool
}

// Write keeps b, or drops the whole copy once the answer passes Limit.
func (a *AnswerBuffer) Write(b []byte) {
	if a.over {
		return
	}
	if int64(len(a.buf)+len(b)) > a.Limit {
		a.over, a.buf = true, nil
		return
	}
	a.buf = append(a.buf, b...)
}

// Bytes is the body kept so far (nil once Over).
func (a *AnswerBuffer) Bytes() []byte { return a.buf }

// Over reports an answer larger than Limit: nothing of it is kept.
func (a *AnswerBuffer) Over() bool { return a.over }

// NotFound answers a path no route serves.
func NotFound(w http.ResponseWriter, r *http.Request) {
	WriteError(w, ProtocolOf(r), &Error{Status: http.StatusNotFound, Type: "invalid_request_error",
		Code: "not_found", Message: fmt.Sprintf("no route for %s %s", Shown(r.Method), Shown(r.URL.Path))})
}
