package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/queue"
	"switchboard/internal/tenant"
)

// The worker side of distributed execution: a leased job is served by the
// same handlers as a local request (attempt loop, retries, fallback,
// first-token gate, admission per attempt, spend settlement), writing to a
// jobWriter that publishes the answer to the job's origin.

// jobCtx marks a request a worker is running for a job.
type jobCtx struct {
	id *tenant.Identity
	// left is the job's remaining total deadline at lease (Redis time).
	left time.Duration
}

type jobKeyT struct{}

var jobKey jobKeyT

func jobOf(ctx context.Context) *jobCtx {
	jc, _ := ctx.Value(jobKey).(*jobCtx)
	return jc
}

// WorkerCaps lists the providers of the running config with their
// fleet-wide concurrency limits (providers.X.max_concurrency).
func (s *Server) WorkerCaps() []queue.Cap {
	snap := s.snap.Load()
	if snap == nil {
		return nil
	}
	caps := make([]queue.Cap, 0, len(snap.Config.Providers))
	for name, p := range snap.Config.Providers {
		c := queue.Cap{Provider: name}
		if p.MaxConcurrency != nil {
			c.Limit = *p.MaxConcurrency
		}
		caps = append(caps, c)
	}
	return caps
}

// RunJob serves one delivery (queue.Worker.Run).
func (s *Server) RunJob(ctx context.Context, d *queue.Delivery) {
	meta, body, err := decodeJob(d.Request)
	if err != nil {
		s.refuseJob(d, "malformed job record: "+err.Error())
		return
	}
	snap := s.snap.Load()
	if snap == nil || snap.Routes.Lookup(meta.Model) == nil {
		// Another config version: a replica that knows the model may take it.
		s.refuseJob(d, "this worker's config has no model "+quoteModel(meta.Model))
		return
	}
	var id *tenant.Identity
	if meta.KeyDigest != "" {
		var ok bool
		id, ok = s.Admission.AuthenticateDigest(meta.KeyDigest)
		if !ok {
			s.refuseJob(d, "this worker's config does not know the job's API key")
			return
		}
	}
	jc := &jobCtx{id: id, left: d.Deadline.Sub(d.Now)}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, span := s.obs.tracer.Job(ctx, meta.Trace, meta.Path, d.ID, time.UnixMilli(meta.Enqueued), s.Clock.Now())
	rctx := context.WithValue(context.WithValue(ctx, jobKey, jc), requestIDKey, meta.RequestID)
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, meta.Path, bytes.NewReader(body))
	if err != nil {
		s.refuseJob(d, "bad job path")
		return
	}
	req.Header = meta.Header
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.ContentLength = int64(len(body))
	jw := &jobWriter{d: d, cancel: cancel, h: http.Header{}, limit: s.queueing.Q.Options().UnaryTerminal - 4096}
	func() {
		defer func() {
			if v := recover(); v != nil {
				s.Log.ErrorContext(rctx, "panic serving a job", "panic", v, "stack", string(debug.Stack()))
				if !jw.wrote {
					writeError(jw, protocolOf(req), &apiError{Status: 500, Type: "server_error", Code: "internal_error",
						Message: "internal error; request id " + meta.RequestID})
				}
			}
		}()
		s.jobRoutes().ServeHTTP(jw, req)
	}()
	span.End(jw.status)
	if err := jw.finish(); err != nil && !errors.Is(err, queue.ErrCanceled) {
		s.Log.WarnContext(rctx, "queue: the job's result was not stored", "job", d.ID, "error", err.Error())
	}
}

func quoteModel(m string) string { b, _ := json.Marshal(m); return string(b) }

// refuseJob gives a job back with the reason logged (and dead-letters it
// after queue.max_deliveries).
func (s *Server) refuseJob(d *queue.Delivery, why string) {
	dead, err := d.Requeue(why)
	s.Log.Warn("queue: refusing a job", "job", d.ID, "why", why, "dead_lettered", dead, "error", errString(err))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func decodeJob(b []byte) (jobMeta, []byte, error) {
	var m jobMeta
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return m, nil, errors.New("no envelope line")
	}
	if err := json.Unmarshal(b[:i], &m); err != nil {
		return m, nil, err
	}
	if !strings.HasPrefix(m.Path, "/v1/") || m.Model == "" {
		return m, nil, errors.New("missing path or model")
	}
	if m.KeyDigest != "" {
		if d, err := hex.DecodeString(m.KeyDigest); err != nil || len(d) != 32 {
			return m, nil, errors.New("bad key digest")
		}
	}
	return m, b[i+1:], nil
}

// jobWriter is the ResponseWriter of a job: a stream's bytes go to the
// origin at every flush (after the first token, as a local stream's
// would); a unary answer is kept, bounded by the terminal capacity
// reserved for it, and stored as the job's terminal.
type jobWriter struct {
	d      *queue.Delivery
	cancel context.CancelCauseFunc
	h      http.Header
	status int
	wrote  bool
	stream bool
	buf    []byte
	limit  int64
	over   bool
	seq    int
	head   bool
	err    error // a fenced publish refused: canceled or lost
	usage  []byte
}

// noteUsage keeps the last usage object a stream's events carried.
func (w *jobWriter) noteUsage(b []byte) {
	if !bytes.Contains(b, usageKey) {
		return
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			if u := gjson.GetBytes(d, "usage"); u.IsObject() {
				w.usage = append(w.usage[:0], u.Raw...)
			}
		}
	}
}

// maxChunk flushes a stream early when one write run grows past it.
const maxChunk = 256 << 10

func (w *jobWriter) Header() http.Header { return w.h }

func (w *jobWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.status, w.wrote = code, true
	w.stream = strings.HasPrefix(w.h.Get("Content-Type"), "text/event-stream")
}

func (w *jobWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.stream {
		w.buf = append(w.buf, b...)
		if len(w.buf) > maxChunk {
			w.Flush()
		}
		return len(b), w.err
	}
	if int64(len(w.buf)+len(b)) > w.limit {
		w.over = true
		w.buf = nil
	}
	if !w.over {
		w.buf = append(w.buf, b...)
	}
	return len(b), nil
}

// Flush publishes a stream's pending bytes (the head first).
func (w *jobWriter) Flush() {
	if !w.stream || w.err != nil {
		return
	}
	w.noteUsage(w.buf)
	var err error
	if !w.head {
		t := queue.Terminal{Kind: "head", Status: w.status, Header: w.h, Body: w.buf}
		err = w.d.Publish(queue.KindHead, 0, t.Encode())
		w.head = true
	} else if len(w.buf) > 0 {
		w.seq++
		err = w.d.Publish(queue.KindChunk, w.seq, w.buf)
	}
	w.buf = w.buf[:0]
	if err != nil {
		// Canceled or lost (or Redis failed): stop the upstream call now;
		// nothing this delivery sends can reach the client any more.
		w.err = err
		w.cancel(err)
	}
}

// finish stores the terminal.
func (w *jobWriter) finish() error {
	if w.err != nil {
		return w.err
	}
	var t queue.Terminal
	switch {
	case !w.wrote:
		// The handler wrote nothing: the job was canceled or its lease
		// lost (context ended); the terminal belongs to someone else.
		return nil
	case w.stream:
		w.Flush()
		if w.err != nil {
			return w.err
		}
		t = queue.Terminal{Kind: "stream", Status: w.status, Chunks: w.seq, Usage: w.usage}
	case w.over:
		t = tooLargeTerminal(w.limit)
	default:
		t = queue.Terminal{Kind: "unary", Status: w.status, Header: w.h, Body: w.buf}
		if u := gjson.GetBytes(w.buf, "usage"); u.IsObject() {
			t.Usage = []byte(u.Raw)
		}
	}
	err := w.d.Complete(t.Encode())
	if errors.Is(err, queue.ErrTooLarge) {
		t = tooLargeTerminal(w.limit)
		err = w.d.Complete(t.Encode())
	}
	return err
}

// tooLargeTerminal is the fixed-size error an over-limit result becomes.
func tooLargeTerminal(limit int64) queue.Terminal {
	return queue.Terminal{Kind: "error", Status: http.StatusBadGateway,
		Body: []byte("the provider's answer exceeds queue.unary_terminal_bytes (" + strconv.FormatInt(limit, 10) + " bytes)")}
}
