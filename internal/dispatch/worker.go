package dispatch

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/front"
	"switchboard/internal/queue"
	"switchboard/internal/sse"
	"switchboard/internal/tenant"
)

// The worker side of distributed execution: a leased job is served by the
// same handlers as a local request (attempt loop, retries, fallback,
// first-token gate, admission per attempt, spend settlement), writing to a
// jobWriter that publishes the answer to the job's origin.

// Job marks a request a worker is running for a queued job.
type Job struct {
	// ID is the job's identity: the ingress authenticated it (nil with
	// auth off).
	ID *tenant.Identity
	// Left is the job's remaining total deadline at lease (Redis time).
	Left time.Duration
}

type jobKey struct{}

// JobOf is the job a request runs for, nil for a client's own request.
func JobOf(ctx context.Context) *Job {
	jc, _ := ctx.Value(jobKey{}).(*Job)
	return jc
}

// WorkerCaps lists the providers of the running config with their
// fleet-wide concurrency limits (providers.X.max_concurrency).
func (p *Plane) WorkerCaps() []queue.Cap {
	snap := p.Snap()
	if snap == nil {
		return nil
	}
	caps := make([]queue.Cap, 0, len(snap.Config.Providers))
	for name, pc := range snap.Config.Providers {
		c := queue.Cap{Provider: name}
		if pc.MaxConcurrency != nil {
			c.Limit = *pc.MaxConcurrency
		}
		caps = append(caps, c)
	}
	// One order for every lease: the rotation over it is the fairness.
	slices.SortFunc(caps, func(a, b queue.Cap) int { return strings.Compare(a.Provider, b.Provider) })
	return caps
}

// RunJob serves one delivery (queue.Worker.Run).
func (p *Plane) RunJob(ctx context.Context, d *queue.Delivery) {
	meta, body, err := decodeJob(d.Request)
	if err != nil {
		p.refuseJob(d, "malformed job record: "+err.Error())
		return
	}
	snap := p.Snap()
	if snap == nil || snap.Routes.Lookup(meta.Model) == nil {
		// Another config version: a replica that knows the model may take it.
		p.refuseJob(d, "this worker's config has no model "+quoteModel(meta.Model))
		return
	}
	var id *tenant.Identity
	if meta.KeyDigest != "" {
		var ok bool
		id, ok = p.Admission.AuthenticateDigest(meta.KeyDigest)
		if !ok {
			p.refuseJob(d, "this worker's config does not know the job's API key")
			return
		}
	} else if snap.Config.Auth.Enabled() || p.Admission.Keys().Enabled() {
		// No key would run the job as auth-off's identity: unlimited,
		// unbilled and an operator. A worker that requires keys never
		// runs a keyless job (an ingress with auth off, or a forged record).
		p.refuseJob(d, "the job carries no API key and this worker's config requires one")
		return
	}
	jc := &Job{ID: id, Left: d.Deadline.Sub(d.Now)}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, span := p.Tracer.Job(ctx, meta.Trace, meta.Path, d.ID, time.UnixMilli(meta.Enqueued), p.Clock.Now())
	rctx := front.WithRequestID(context.WithValue(ctx, jobKey{}, jc), meta.RequestID)
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, meta.Path, bytes.NewReader(body))
	if err != nil {
		p.refuseJob(d, "bad job path")
		return
	}
	req.Header = meta.Header
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.ContentLength = int64(len(body))
	jw := &jobWriter{d: d, cancel: cancel, h: http.Header{}, answer: front.AnswerBuffer{Limit: p.Q.Options().UnaryTerminal - 4096}}
	func() {
		defer func() {
			if v := recover(); v != nil {
				p.Log.ErrorContext(rctx, "panic serving a job", "panic", v, "stack", string(debug.Stack()))
				if !jw.wrote {
					front.WriteError(jw, front.ProtocolOf(req), &front.Error{Status: 500, Type: "server_error", Code: "internal_error",
						Message: "internal error; request id " + meta.RequestID})
				}
			}
		}()
		p.Jobs.ServeHTTP(jw, req)
	}()
	span.End(jw.status)
	jw.retry = p.completeRetry(ctx)
	if err := jw.finish(); err != nil && !errors.Is(err, queue.ErrCanceled) {
		p.Log.WarnContext(rctx, "queue: the job's result was not stored", "job", d.ID, "error", err.Error())
	}
}

func quoteModel(m string) string { b, _ := json.Marshal(m); return string(b) }

// refuseJob gives a job back with the reason logged (and dead-letters it
// after queue.max_deliveries).
func (p *Plane) refuseJob(d *queue.Delivery, why string) {
	dead, err := d.Requeue(why)
	p.Log.Warn("queue: refusing a job", "job", d.ID, "why", why, "dead_lettered", dead, "error", errString(err))
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
	// buf holds a stream's bytes until the next flush publishes them.
	buf []byte
	// answer is a unary answer, bounded by the terminal capacity
	// reserved for it.
	answer front.AnswerBuffer
	seq    int
	head   bool
	err    error // a fenced publish refused: canceled or lost
	usage  []byte
	// retry waits before the next try at storing the result after a
	// failure that may pass (nil: do not try again).
	retry func(try int, err error) bool
}

// completeRetry is how long a worker keeps trying to store a job's result
// when Redis fails (a master failing over answers CLUSTERDOWN or refuses
// connections for a few seconds): it waits 50 ms, doubling up to 1 s, for
// as long as the lease lasts. Without it the client would wait for the
// lease to expire and the job to run again. A fenced refusal (the job was
// canceled, or its lease went to another worker) ends it at once; a try
// whose reply was lost and that had in fact stored the result meets the
// fence the next time, so the result is never stored twice.
func (p *Plane) completeRetry(ctx context.Context) func(int, error) bool {
	deadline := p.Clock.Now().Add(p.Q.Options().Lease)
	return func(try int, err error) bool {
		if errors.Is(err, queue.ErrLost) || errors.Is(err, queue.ErrCanceled) || errors.Is(err, queue.ErrTooLarge) {
			return false
		}
		wait := min(50*time.Millisecond<<min(try, 5), time.Second)
		if p.Clock.Now().Add(wait).After(deadline) {
			return false
		}
		c, stop := p.Clock.After(wait)
		defer stop()
		select {
		case <-c:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

var usageKey = []byte(`"usage"`)

// noteUsage keeps the last usage object a stream's events carried (b
// holds whole events: the relay writes event by event).
func (w *jobWriter) noteUsage(b []byte) {
	if !bytes.Contains(b, usageKey) {
		return
	}
	events := sse.NewReader(bytes.NewReader(b))
	for {
		ev, err := events.Next()
		if err != nil {
			return
		}
		if u := gjson.GetBytes(ev.Data, "usage"); u.IsObject() {
			w.usage = append(w.usage[:0], u.Raw...)
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
	w.answer.Write(b)
	return len(b), nil
}

// Flush publishes a stream's pending bytes (the head first), without
// waiting for Redis (queue.Delivery.Send): a refusal stops the upstream
// call at the next flush, and the completion waits for every message.
func (w *jobWriter) Flush() {
	if !w.stream || w.err != nil {
		return
	}
	w.noteUsage(w.buf)
	var err error
	if !w.head {
		t := queue.Terminal{Kind: "head", Status: w.status, Header: w.h, Body: w.buf}
		err = w.d.Send(queue.KindHead, 0, t.Encode())
		w.head = true
	} else if len(w.buf) > 0 {
		w.seq++
		err = w.d.Send(queue.KindChunk, w.seq, w.buf)
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
	case w.answer.Over():
		t = tooLargeTerminal(w.answer.Limit)
	default:
		t = queue.Terminal{Kind: "unary", Status: w.status, Header: w.h, Body: w.answer.Bytes()}
		if u := gjson.GetBytes(t.Body, "usage"); u.IsObject() {
			t.Usage = []byte(u.Raw)
		}
	}
	err := w.complete(t.Encode())
	if errors.Is(err, queue.ErrTooLarge) {
		t = tooLargeTerminal(w.answer.Limit)
		err = w.complete(t.Encode())
	}
	return err
}

// complete stores the result, trying again while w.retry says so.
func (w *jobWriter) complete(b []byte) error {
	err := w.d.Complete(b)
	for try := 0; err != nil && w.retry != nil && w.retry(try, err); try++ {
		err = w.d.Complete(b)
	}
	return err
}

// tooLargeTerminal is the fixed-size error an over-limit result becomes.
func tooLargeTerminal(limit int64) queue.Terminal {
	return queue.Terminal{Kind: "error", Status: http.StatusBadGateway,
		Body: []byte("the provider's answer exceeds queue.unary_terminal_bytes (" + strconv.FormatInt(limit, 10) + " bytes)")}
}
