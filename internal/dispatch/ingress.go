package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"switchboard/internal/front"
	"switchboard/internal/provider"
	"switchboard/internal/queue"
	"switchboard/internal/route"
	"switchboard/internal/sse"
	"switchboard/internal/tags"
	"switchboard/internal/tenant"
	"switchboard/internal/tracing"
)

// Distributed execution (queue.mode: redis). The ingress side: a request
// that passed authentication, parsing, translation and model lookup is
// enqueued as a job; a worker (see worker.go) runs it through the same
// handlers and publishes the answer; this side relays that answer to the
// client exactly as a local answer would have been written.

// errOriginPending: the subscription failed a moment ago (Redis away);
// requests fail fast instead of each trying again.
var errOriginPending = errors.New("the queue subscription is not up (redis unreachable)")

// originFor returns this replica's subscription. One attempt runs at a
// time (requests arriving meanwhile wait for it, within their own
// deadline); after a failure, requests fail fast for 250 ms. So an
// ingress booted while Redis was down starts serving once Redis answers.
func (p *Plane) originFor(ctx context.Context) (*queue.Origin, error) {
	p.mu.Lock()
	if o := p.origin; o != nil {
		p.mu.Unlock()
		return o, nil
	}
	if p.attempt == nil && p.Clock.Now().Sub(p.failed) >= 250*time.Millisecond {
		ch := make(chan struct{})
		p.attempt = ch
		go func() {
			actx, cancel := context.WithTimeout(context.Background(), ingressOp)
			o, err := p.Q.StartOrigin(actx, p.Log)
			cancel()
			p.mu.Lock()
			if err != nil {
				p.failed = p.Clock.Now()
			} else {
				p.origin = o
			}
			p.attempt = nil
			p.mu.Unlock()
			close(ch)
		}()
	}
	ch := p.attempt
	p.mu.Unlock()
	if ch == nil {
		return nil, errOriginPending
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.origin == nil {
		return nil, errOriginPending
	}
	return p.origin, nil
}

// jobMeta is a job's request envelope: what the worker needs to serve it
// as this replica would have. The key travels as its SHA-256 digest only.
type jobMeta struct {
	Path      string      `json:"path"`
	Header    http.Header `json:"header,omitempty"`
	KeyDigest string      `json:"key,omitempty"`
	Model     string      `json:"model"`
	RequestID string      `json:"request_id,omitempty"`
	// Trace is the ingress span's traceparent and Enqueued when it was
	// enqueued (Unix ms): the worker's spans continue the trace.
	Trace    string `json:"traceparent,omitempty"`
	Enqueued int64  `json:"enqueued_ms,omitempty"`
}

// jobHeaders are the client headers a worker's handler reads.
var jobHeaders = append([]string{"Anthropic-Version", "Content-Type", "Cache-Control", tags.Header}, front.Forwarded...)

func (p *Plane) encodeJob(r *http.Request, in *Request) []byte {
	m := jobMeta{Path: r.URL.Path, Model: in.Model, RequestID: front.RequestID(r.Context())}
	if tp := tracing.Traceparent(r.Context()); tp != "" {
		m.Trace, m.Enqueued = tp, p.Clock.Now().UnixMilli()
	}
	for _, k := range jobHeaders {
		if v := r.Header.Values(k); len(v) > 0 {
			if m.Header == nil {
				m.Header = http.Header{}
			}
			m.Header[k] = v
		}
	}
	if k := front.PresentedKey(r); k != "" {
		d := sha256.Sum256([]byte(k))
		m.KeyDigest = hex.EncodeToString(d[:])
	}
	meta, _ := json.Marshal(m)
	out := make([]byte, 0, len(meta)+1+len(in.Body))
	out = append(append(out, meta...), '\n')
	return append(out, in.Body...)
}

// Request is a request the ingress enqueues: authenticated, its body
// checked (and translated), its model routed.
type Request struct {
	Route  *route.Route
	ID     *tenant.Identity
	Model  string
	Body   []byte
	Stream bool
	// Timeout is timeouts.request: the job's total deadline, its wait in
	// the queue included.
	Timeout time.Duration
}

// Dispatch enqueues in and relays its answer. It always answers.
// refused reports a refusal before the job was enqueued (the queue full
// or unreachable, a worker-only replica): no worker will ever see the
// request, so its usage row is this replica's to record.
func (p *Plane) Dispatch(w http.ResponseWriter, r *http.Request, proto front.Protocol, ep provider.Endpoint, in *Request) (refused bool) {
	refuse := func() { refused = true }
	if !p.Ingress {
		refuse()
		front.WriteError(w, proto, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "not_ingress",
			Message:    "this replica runs with --role worker and does not take requests; send them to an ingress replica",
			RetryAfter: time.Second})
		return
	}
	unavailable := func(err error) {
		refuse()
		p.Log.WarnContext(r.Context(), "queue unavailable; refusing the request", "error", err.Error())
		front.WriteError(w, proto, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "queue_unavailable",
			Message: "the job queue (redis) is unavailable; retry shortly", RetryAfter: time.Second})
	}
	octx, cancel := context.WithTimeout(r.Context(), ingressOp)
	origin, err := p.originFor(octx)
	cancel()
	if err != nil {
		unavailable(err)
		return
	}
	order := p.Selector.OrderBody(in.Route, in.Body)
	tier := 0
	tenantName := ""
	if in.ID != nil {
		tier, tenantName = in.ID.Tier, in.ID.Tenant
	}
	j := &queue.Job{ID: queue.NewID(), OToken: queue.NewID(), Origin: origin.ID, Provider: order[0].Provider,
		Tier: tier, Stream: in.Stream, Timeout: in.Timeout, Endpoint: r.URL.Path, Tenant: tenantName,
		Request: p.encodeJob(r, in)}
	watch, stop := origin.Watch(j.ID)
	defer stop()
	ectx, cancel := context.WithTimeout(r.Context(), ingressOp)
	_, err = p.Q.Enqueue(ectx, j)
	cancel()
	switch {
	case errors.Is(err, queue.ErrFull):
		refuse()
		front.WriteError(w, proto, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "queue_full",
			Message: "the queue for provider " + j.Provider + " is full (" + err.Error() + "); retry later", RetryAfter: time.Second})
		return
	case err != nil:
		unavailable(err)
		return
	}
	rl := &relayJob{p: p, w: w, r: r, proto: proto, ep: ep, j: j, q: p.Q}
	rl.run(watch, in.Timeout)
	return
}

// relayJob writes one job's answer to its client.
type relayJob struct {
	p     *Plane
	w     http.ResponseWriter
	r     *http.Request
	proto front.Protocol
	ep    provider.Endpoint
	j     *queue.Job
	q     *queue.Queue

	watch   *queue.Watch
	sw      *sse.Writer // set once the stream's head was written
	gen     string      // the generation whose bytes reached the client
	seq     int
	settled bool
	// finished: a check found the job finished while the messages that
	// say how had not all arrived.
	finished bool
}

func (rl *relayJob) op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(rl.r.Context()), ingressOp)
}

// run waits for the job's messages until its terminal, the client leaving
// or the total deadline (queue wait plus upstream; it never grows). It
// checks on the job every third of the origin lease, which renews the
// origin's claim.
func (rl *relayJob) run(watch *queue.Watch, total time.Duration) {
	rl.watch = watch
	clk := rl.p.Clock
	deadline, stopDeadline := clk.After(total)
	defer stopDeadline()
	every := max(rl.q.Options().OriginLease/3, 50*time.Millisecond)
	poll, stopPoll := clk.After(every)
	defer func() { stopPoll() }()
	for !rl.settled {
		select {
		case m := <-watch.C:
			rl.take(m)
		case <-poll:
			poll, stopPoll = clk.After(every) // from this tick, as a ticker would
			rl.check()
		case <-rl.r.Context().Done():
			rl.cancel("client went away")
			return
		case <-deadline:
			rl.cancel("deadline")
			rl.fail(&front.Error{Status: http.StatusGatewayTimeout, Type: "server_error", Code: "deadline_exceeded",
				Message: "the request did not finish within timeouts.request"})
			return
		}
	}
}

func (rl *relayJob) take(m queue.Msg) {
	rl.watch.Took(m)
	rl.handle(m)
}

// drain applies the messages already received: a poll that finds the job
// finished must not overtake the messages that say how.
func (rl *relayJob) drain() {
	for !rl.settled {
		select {
		case m := <-rl.watch.C:
			rl.take(m)
		default:
			return
		}
	}
}

// handle applies one message.
func (rl *relayJob) handle(m queue.Msg) {
	if rl.sw != nil && m.Gen != rl.gen {
		// Bytes of another delivery reached the client: that delivery is
		// gone, and a stream cannot be resumed by a replacement.
		rl.abort("the worker serving this stream was lost")
		return
	}
	switch m.Kind {
	case queue.KindHead:
		t := queue.ParseTerminal(m.Payload)
		if t.Kind != "head" || rl.sw != nil {
			rl.abort("a malformed stream head")
			return
		}
		h := rl.w.Header()
		for k, v := range t.Header {
			if !front.HopHeader(k) {
				h[k] = v
			}
		}
		rl.w.WriteHeader(t.Status)
		rl.sw = sse.NewWriter(rl.w)
		rl.gen = m.Gen
		_ = rl.sw.Raw(t.Body)
	case queue.KindChunk:
		if rl.sw == nil || m.Seq != rl.seq+1 {
			rl.abort("stream chunks were lost between worker and origin")
			return
		}
		rl.seq = m.Seq
		_ = rl.sw.Raw(m.Payload)
	case queue.KindTerminal:
		b := m.Payload
		if len(b) == 0 {
			ctx, cancel := rl.op()
			var err error
			b, err = rl.q.Terminal(ctx, rl.j.Provider, rl.j.ID)
			cancel()
			if err != nil || b == nil {
				rl.failUnavailable("the job's result could not be read back")
				return
			}
		}
		rl.terminal(queue.ParseTerminal(b))
	case queue.KindRequeued:
		if rl.sw != nil {
			rl.abort("the worker serving this stream was lost")
		}
	case queue.KindCanceled:
		rl.terminal(queue.ParseTerminal(m.Payload))
	}
}

// check renews the origin's claim and catches what a lost message hid.
func (rl *relayJob) check() {
	ctx, cancel := rl.op()
	st, gen, err := rl.q.OriginState(ctx, rl.j.Provider, rl.j.ID, rl.j.OToken, false)
	cancel()
	if err == nil && st != "waiting" && st != "leased" {
		rl.drain()
		if rl.settled {
			return
		}
	}
	switch {
	case err != nil:
		return // Redis blip: the next poll retries; the lease has slack
	case st == "done" || st == "canceled":
		// A poll can overtake the messages that say how the job ended (a
		// stream's head and chunks are still on their way through
		// pub/sub): the terminal stored in Redis is read only when the
		// job is still unsettled at the next check, when they were lost.
		if !rl.finished {
			rl.finished = true
			return
		}
		ctx, cancel := rl.op()
		b, err := rl.q.Terminal(ctx, rl.j.Provider, rl.j.ID)
		cancel()
		if err == nil && b != nil {
			rl.terminal(queue.ParseTerminal(b))
		}
	case st == "dead":
		rl.terminal(queue.Terminal{Kind: "dead", Status: http.StatusBadGateway})
	case st == "missing" || st == "lost":
		rl.failUnavailable("the job disappeared from the queue (redis restarted?)")
	case rl.sw != nil && gen != rl.gen:
		rl.abort("the worker serving this stream was lost")
	}
}

// terminal writes the job's final state.
func (rl *relayJob) terminal(t queue.Terminal) {
	switch t.Kind {
	case "unary":
		h := rl.w.Header()
		for k, v := range t.Header {
			if !front.HopHeader(k) && k != "Content-Type" {
				h[k] = v
			}
		}
		front.WriteUnary(rl.w, t.Status, t.Body)
		rl.ack()
	case "stream":
		if rl.sw == nil {
			rl.abort("the stream's head was lost")
			return
		}
		if t.Chunks != rl.seq {
			rl.abort("stream chunks were lost between worker and origin")
			return
		}
		rl.sw.Flush()
		rl.ack()
	case "canceled":
		rl.settled = true // only this origin cancels its job; the client is gone
	case "expired":
		rl.fail(&front.Error{Status: http.StatusGatewayTimeout, Type: "server_error", Code: "deadline_exceeded",
			Message: "the request waited in the queue past timeouts.request"})
		rl.ack()
	case "dead":
		rl.fail(&front.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "job_failed",
			Message: "the job failed on every delivery (queue.max_deliveries) and was dead-lettered: " + string(t.Body)})
	default:
		rl.fail(&front.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "job_failed",
			Message: "the job's result was unusable: " + string(t.Body)})
		rl.ack()
	}
}

func (rl *relayJob) ack() {
	rl.settled = true
	ctx, cancel := rl.op()
	_, _, _ = rl.q.OriginState(ctx, rl.j.Provider, rl.j.ID, rl.j.OToken, true)
	cancel()
}

// cancel asks for the job's cancellation (the worker stops its upstream
// call); usage already observed stays settled.
func (rl *relayJob) cancel(why string) {
	rl.settled = true
	ctx, cancel := rl.op()
	st, err := rl.q.Cancel(ctx, rl.j.Provider, rl.j.ID, rl.j.OToken)
	cancel()
	if err == nil && (st == "waiting" || st == "leased") {
		rl.p.Metrics.Queue.Cancellations.Inc()
		rl.p.Log.InfoContext(rl.r.Context(), "queue: job canceled", "job", rl.j.ID, "why", why, "state", st)
	}
}

// fail answers with e, or ends a started stream with it.
func (rl *relayJob) fail(e *front.Error) {
	rl.settled = true
	if rl.sw != nil {
		front.EndFailedStream(rl.sw, rl.proto, rl.ep, e.Message)
		return
	}
	front.WriteError(rl.w, rl.proto, e)
}

func (rl *relayJob) failUnavailable(msg string) {
	rl.fail(&front.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "queue_unavailable",
		Message: msg + "; retry shortly", RetryAfter: time.Second})
}

// abort ends a started stream with an error event and cancels the job.
func (rl *relayJob) abort(why string) {
	rl.p.Log.WarnContext(rl.r.Context(), "queue: ending the stream", "job", rl.j.ID, "why", why)
	rl.cancel(why)
	if rl.sw == nil {
		rl.failUnavailable(why)
		return
	}
	front.EndFailedStream(rl.sw, rl.proto, rl.ep, why)
}
