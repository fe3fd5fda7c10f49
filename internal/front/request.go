package front

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"switchboard/internal/provider"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
)

type requestIDKey struct{}

// RequestID returns the request id carried by ctx ("" when none).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// WithRequestID is ctx carrying the request id id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// LogHandler adds the request id of the record's context to every log
// line, so that helpers deep in a request need only pass ctx.
type LogHandler struct{ slog.Handler }

func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h LogHandler) WithAttrs(a []slog.Attr) slog.Handler { return LogHandler{h.Handler.WithAttrs(a)} }
func (h LogHandler) WithGroup(n string) slog.Handler      { return LogHandler{h.Handler.WithGroup(n)} }

// StatusClientClosed is the status logged, counted and recorded for a
// request whose client left before any answer was written (nginx's
// "client closed request").
const StatusClientClosed = 499

// ProtocolOf is the protocol of r's path: Anthropic for /v1/messages,
// Gemini for /v1beta/ and a model method (/v1/models/{m}:generateContent),
// else OpenAI.
func ProtocolOf(r *http.Request) Protocol {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1/messages"):
		return Anthropic
	case strings.HasPrefix(p, "/v1beta/"), strings.HasPrefix(p, "/v1/models/") && strings.Contains(p, ":"):
		return Gemini
	}
	return OpenAI
}

// PresentedKey finds the client's gateway key: Authorization Bearer,
// x-api-key or x-goog-api-key, and on a Gemini path the ?key= query
// parameter (Google's API key convention).
func PresentedKey(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			return strings.TrimSpace(a[7:])
		}
	}
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	if ProtocolOf(r) == Gemini {
		return r.URL.Query().Get("key")
	}
	return ""
}

// Forwarded are the client headers passed upstream; everything else
// (notably the client's own Authorization and x-api-key) stays here.
// The names are canonical, so that an operator's header of the same name
// (canonicalised at load) replaces the client's instead of joining it.
var Forwarded = []string{http.CanonicalHeaderKey("OpenAI-Organization"), http.CanonicalHeaderKey("OpenAI-Beta"),
	http.CanonicalHeaderKey("OpenAI-Project"), http.CanonicalHeaderKey("Anthropic-Beta")}

// ReadBody reads the whole request body within the configured limit. The
// body is read before anything is sent upstream: Go's HTTP/1 server closes
// an unread request body once response headers go out, which can tear down
// a fast upstream stream mid-way (golang/go#40747).
//
// The whole body must arrive within timeout of the handler's start
// (limits.body_timeout), or the answer is 408: a body trickled byte by byte
// must not hold a connection and a slot for ever.
func ReadBody(r *http.Request, w http.ResponseWriter, limit int64, timeout time.Duration) ([]byte, *Error) {
	if limit <= 0 {
		limit = 10 << 20
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	if timeout > 0 && r.ContentLength != 0 {
		// Unsupported only where the connection is not ours (tests).
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	}
	b, err := provider.ReadAllSized(http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	if err != nil {
		var mb *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mb):
			return nil, tooLarge(limit)
		case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
			return nil, &Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "body_timeout",
				Message: fmt.Sprintf("the request body did not arrive within limits.body_timeout (%s)", timeout)}
		}
		return nil, Invalid("could not read the whole request body")
	}
	return b, nil
}

func tooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: fmt.Sprintf("request body is larger than limits.max_request_body (%d bytes)", limit)}
}

// Handler is a plane's handler of an authenticated request: the server's
// auth hands it the config snapshot the request runs under and the
// caller's identity (nil with auth off; for an admin call, nil when
// auth.admin_token was presented).
type Handler func(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity)
