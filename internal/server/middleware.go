package server

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"switchboard/internal/front"
	"switchboard/internal/metrics"
)

type ctxKey int

const (
	// spareKey marks a request on a connection accepted beyond
	// limits.max_connections.
	spareKey ctxKey = iota
)

// validRequestID accepts a client's X-Request-Id when it is short and
// printable, so that it is safe in logs and headers.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// statusWriter records the status for the access log and metrics. It
// passes Flush through so streams are not buffered.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	// counted is set once the request is in m (see Answered).
	counted bool
	m       *metrics.Metrics
	path    string
	start   time.Time
	// body is the request body as the handler reads it (when tracked:
	// in the same allocation as the writer).
	body    trackedBody
	tracked bool
}

// trackedBody notes whether the request body was read to its end.
type trackedBody struct {
	io.ReadCloser
	done bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done = true
	}
	return n, err
}

// unread reports an answer going out before the body was read to its end
// (a refusal: 401, 404, 405, 408, 413). net/http would then wait to drain
// the body the client may never send, holding the answer and the
// connection; closing the connection instead answers at once.
func (w *statusWriter) unread() bool { return w.tracked && !w.body.done }

func (w *statusWriter) beforeHeader() {
	if w.unread() {
		w.Header().Set("Connection", "close")
	}
}

// Answered counts the request in the metrics now, before its answer is
// flushed, so that whoever has the answer finds it counted (the
// middleware would otherwise count it after the handler returns).
func (w *statusWriter) Answered() {
	if w.counted || w.m == nil {
		return
	}
	w.counted = true
	w.m.InFlight.Dec()
	rl := routeLabel(w.path)
	w.m.Requests.WithLabelValues(rl, metrics.Status(w.status)).Inc()
	w.m.RequestDuration.WithLabelValues(rl).Observe(time.Since(w.start).Seconds())
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
		w.beforeHeader()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
		w.beforeHeader()
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// wrap is the outer middleware: request id, recovery, access log.
func (s *Server) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		ctx := front.WithRequestID(r.Context(), id)
		r = r.WithContext(ctx)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK, m: s.Metrics, path: r.URL.Path, start: start}
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			sw.body, sw.tracked = trackedBody{ReadCloser: r.Body}, true
			r.Body = &sw.body
		}
		s.Metrics.InFlight.Inc()
		defer func() {
			if sw.unread() {
				// The connection closes after this answer; a read deadline
				// now keeps net/http's drain of the rest from waiting on it.
				_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			}
		}()
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.Log.ErrorContext(ctx, "panic serving request", "panic", v, "stack", string(debug.Stack()))
				if !sw.wrote {
					front.WriteError(sw, front.ProtocolOf(r), &front.Error{Status: 500, Type: "server_error", Code: "internal_error",
						Message: "internal error; request id " + id})
				}
			}
			if !sw.wrote && ctx.Err() != nil {
				// The client left before any answer was written: nothing
				// went out, so not the 200 net/http would default to.
				sw.status = front.StatusClientClosed
			}
			sw.Answered()
			if s.Log.Enabled(ctx, slog.LevelInfo) { // the attrs would be built for nothing
				s.Log.LogAttrs(ctx, slog.LevelInfo, "request", slog.String("method", front.Shown(r.Method)),
					slog.String("path", front.Shown(r.URL.Path)), slog.Int("status", sw.status),
					slog.Duration("duration", time.Since(start)))
			}
		}()
		if spare, _ := ctx.Value(spareKey).(bool); spare {
			// Over limits.max_connections: health checks only, one
			// answer per connection.
			sw.Header().Set("Connection", "close")
			if r.URL.Path != "/health" && r.URL.Path != "/ready" {
				front.WriteError(sw, front.ProtocolOf(r), &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error",
					Code: "too_many_connections", Message: "the gateway is at limits.max_connections; retry shortly",
					RetryAfter: time.Second})
				return
			}
		}
		next.ServeHTTP(sw, r)
	})
}

// routeLabel bounds the route label to known paths.
func routeLabel(p string) string {
	switch p {
	case "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings", "/v1/messages",
		"/v1/models", "/health", "/ready", "/metrics", "/v1/usage", "/v1/health/detail", "/dashboard", "/dashboard/data", "/admin":
		return p
	}
	if strings.HasPrefix(p, "/v1/models/") {
		return "/v1/models/{name}"
	}
	if strings.HasPrefix(p, "/admin/") {
		return adminRouteLabel(p)
	}
	return "other"
}

// adminRouteLabel bounds the metrics label of an /admin path: the
// collection, with "/{id}" for anything below it.
func adminRouteLabel(p string) string {
	rest, ok := strings.CutPrefix(p, "/admin/v1/")
	if !ok {
		return "other"
	}
	coll, sub, _ := strings.Cut(rest, "/")
	switch coll {
	case "keys", "tenants", "audit", "usage", "requests", "overview":
	default:
		return "/admin/v1/other"
	}
	if sub != "" {
		return "/admin/v1/" + coll + "/{id}"
	}
	return "/admin/v1/" + coll
}
