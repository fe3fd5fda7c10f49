package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/metrics"
	"switchboard/internal/provider"
	"switchboard/internal/queue"
	"switchboard/internal/sse"
)

// Distributed execution (queue.mode: redis). The ingress side: a request
// that passed authentication, parsing, translation and model lookup is
// enqueued as a job; a worker (see worker.go) runs it through the same
// handlers and publishes the answer; this side relays that answer to the
// client exactly as a local answer would have been written.

// Queueing is the server's distributed-execution state (nil: mode off).
type Queueing struct {
	Q *queue.Queue
	Role

	mu      sync.Mutex
	origin  *queue.Origin
	attempt chan struct{} // closed when the running subscription attempt ends
	failed  time.Time     // the last attempt's failure
}

// ingressOp bounds one queue call of an ingress (and of the gauges and
// health detail). Every Redis command is also bounded by
// redis.command_timeout; this covers a pool wait and a reconnect. Unlike a
// worker's transitions it is not tied to the lease: an ingress holds none.
const ingressOp = 5 * time.Second

// errOriginPending: the subscription failed a moment ago (Redis away);
// requests fail fast instead of each trying again.
var errOriginPending = errors.New("the queue subscription is not up (redis unreachable)")

// JoinQueue switches the server to distributed execution on q; an
// ingress starts its subscription at once.
func (s *Server) JoinQueue(q *queue.Queue, role Role) {
	s.queueing = &Queueing{Q: q, Role: role}
	s.Metrics.WatchQueue(s.queueState)
	if role.Ingress {
		// Start the attempt without waiting for it (a done context).
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _ = s.queueing.originFor(ctx, s)
	}
}

// queueState reads the shared queue for the gauges (bounded by the
// queue's operation timeout).
func (s *Server) queueState() (metrics.QueueState, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), ingressOp)
	defer cancel()
	st, err := s.queueing.Q.Stats(ctx)
	if err != nil {
		return metrics.QueueState{}, false
	}
	// Every configured provider has a series, 0 until it has waited.
	if snap := s.snap.Load(); snap != nil {
		for name := range snap.Config.Providers {
			if _, ok := st.Waiting[name]; !ok {
				st.Waiting[name] = 0
			}
		}
	}
	return metrics.QueueState{Waiting: st.Waiting, Leased: st.Leased, DLQ: st.DLQ}, true
}

// queueDetail is the queue section of /v1/health/detail (nil with the
// queue off): this replica's role and the shared queue's state, or the
// error that kept it from being read.
func (s *Server) queueDetail(ctx context.Context) map[string]any {
	qg := s.queueing
	if qg == nil {
		return nil
	}
	out := map[string]any{"mode": "redis", "role": qg.Role.String(), "namespace": queue.Namespace}
	ctx, cancel := context.WithTimeout(ctx, ingressOp)
	defer cancel()
	st, err := qg.Q.Stats(ctx)
	if err != nil {
		out["available"], out["error"] = false, "redis does not answer"
		return out
	}
	o := qg.Q.Options()
	out["available"] = true
	out["waiting"], out["leased"], out["retained_jobs"], out["dlq"] = st.Waiting, st.Leased, st.Retained, st.DLQ
	out["bytes"] = map[string]int64{"requests": st.BaseBytes, "terminals": st.TerminalBytes, "dlq": st.DLQBytes}
	out["limits"] = map[string]any{"depth": o.Depth, "max_deliveries": o.MaxDeliveries, "lease_seconds": o.Lease.Seconds(),
		"retained_jobs": o.RetainedJobs, "dlq_max": o.DLQMax}
	return out
}

// originFor returns this replica's subscription. One attempt runs at a
// time (requests arriving meanwhile wait for it, within their own
// deadline); after a failure, requests fail fast for 250 ms. So an
// ingress booted while Redis was down starts serving once Redis answers.
func (qg *Queueing) originFor(ctx context.Context, s *Server) (*queue.Origin, error) {
	qg.mu.Lock()
	if o := qg.origin; o != nil {
		qg.mu.Unlock()
		return o, nil
	}
	if qg.attempt == nil && time.Since(qg.failed) >= 250*time.Millisecond {
		ch := make(chan struct{})
		qg.attempt = ch
		go func() {
			actx, cancel := context.WithTimeout(context.Background(), ingressOp)
			o, err := qg.Q.StartOrigin(actx, s.Log)
			cancel()
			qg.mu.Lock()
			if err != nil {
				qg.failed = time.Now()
			} else {
				qg.origin = o
			}
			qg.attempt = nil
			qg.mu.Unlock()
			close(ch)
		}()
	}
	ch := qg.attempt
	qg.mu.Unlock()
	if ch == nil {
		return nil, errOriginPending
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	qg.mu.Lock()
	defer qg.mu.Unlock()
	if qg.origin == nil {
		return nil, errOriginPending
	}
	return qg.origin, nil
}

// jobMeta is a job's request envelope: what the worker needs to serve it
// as this replica would have. The key travels as its SHA-256 digest only.
type jobMeta struct {
	Path      string      `json:"path"`
	Header    http.Header `json:"header,omitempty"`
	KeyDigest string      `json:"key,omitempty"`
	Model     string      `json:"model"`
	RequestID string      `json:"request_id,omitempty"`
}

// jobHeaders are the client headers a worker's handler reads.
var jobHeaders = append([]string{"Anthropic-Version", "Content-Type", "Cache-Control"}, forwarded...)

func encodeJob(r *http.Request, in *incoming) []byte {
	m := jobMeta{Path: r.URL.Path, Model: in.model, RequestID: RequestID(r.Context())}
	for _, k := range jobHeaders {
		if v := r.Header.Values(k); len(v) > 0 {
			if m.Header == nil {
				m.Header = http.Header{}
			}
			m.Header[k] = v
		}
	}
	if k := presentedKey(r); k != "" {
		d := sha256.Sum256([]byte(k))
		m.KeyDigest = hex.EncodeToString(d[:])
	}
	meta, _ := json.Marshal(m)
	out := make([]byte, 0, len(meta)+1+len(in.body))
	out = append(append(out, meta...), '\n')
	return append(out, in.body...)
}

// queued reports whether this request is to be enqueued rather than run
// here: queue mode, and not already a job a worker is running.
func (s *Server) queued(r *http.Request) bool {
	return s.queueing != nil && jobOf(r.Context()) == nil
}

// dispatch enqueues in and relays its answer. It always answers.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, proto Protocol, ep provider.Endpoint, in *incoming) {
	qg := s.queueing
	// A refusal before the job is enqueued is this replica's to record:
	// no worker will ever see the request.
	refused := func() {
		if u, _ := r.Context().Value(usageRecordKey{}).(*usageRecord); u != nil {
			u.ingress = true
		}
	}
	if !qg.Ingress {
		refused()
		writeError(w, proto, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "not_ingress",
			Message:    "this replica runs with --role worker and does not take requests; send them to an ingress replica",
			RetryAfter: time.Second})
		return
	}
	unavailable := func(err error) {
		refused()
		s.Log.WarnContext(r.Context(), "queue unavailable; refusing the request", "error", err.Error())
		writeError(w, proto, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "queue_unavailable",
			Message: "the job queue (redis) is unavailable; retry shortly", RetryAfter: time.Second})
	}
	octx, cancel := context.WithTimeout(r.Context(), ingressOp)
	origin, err := qg.originFor(octx, s)
	cancel()
	if err != nil {
		unavailable(err)
		return
	}
	cfg := in.snap.Config
	order := s.selector.OrderBody(in.rt, in.body)
	tier := 0
	tenantName := ""
	if in.id != nil {
		tier, tenantName = in.id.Tier, in.id.Tenant
	}
	j := &queue.Job{ID: queue.NewID(), OToken: queue.NewID(), Origin: origin.ID, Provider: order[0].Provider,
		Tier: tier, Stream: in.stream, Timeout: cfg.Timeouts.Request.D(), Endpoint: r.URL.Path, Tenant: tenantName,
		Request: encodeJob(r, in)}
	watch, stop := origin.Watch(j.ID)
	defer stop()
	ectx, cancel := context.WithTimeout(r.Context(), ingressOp)
	_, err = qg.Q.Enqueue(ectx, j)
	cancel()
	switch {
	case errors.Is(err, queue.ErrFull):
		refused()
		writeError(w, proto, &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "queue_full",
			Message: "the queue for provider " + j.Provider + " is full (" + err.Error() + "); retry later", RetryAfter: time.Second})
		return
	case err != nil:
		unavailable(err)
		return
	}
	rl := &relayJob{s: s, w: w, r: r, proto: proto, ep: ep, j: j, q: qg.Q}
	rl.run(watch, cfg.Timeouts.Request.D())
}

// relayJob writes one job's answer to its client.
type relayJob struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	proto Protocol
	ep    provider.Endpoint
	j     *queue.Job
	q     *queue.Queue

	watch   *queue.Watch
	sw      *sse.Writer // set once the stream's head was written
	gen     string      // the generation whose bytes reached the client
	seq     int
	settled bool
}

func (rl *relayJob) op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(rl.r.Context()), ingressOp)
}

// run waits for the job's messages until its terminal, the client leaving
// or the total deadline (queue wait plus upstream; it never grows).
func (rl *relayJob) run(watch *queue.Watch, total time.Duration) {
	rl.watch = watch
	deadline := time.NewTimer(total)
	defer deadline.Stop()
	poll := time.NewTicker(max(rl.q.Options().OriginLease/3, 50*time.Millisecond))
	defer poll.Stop()
	for !rl.settled {
		select {
		case m := <-watch.C:
			rl.take(m)
		case <-poll.C:
			rl.check()
		case <-rl.r.Context().Done():
			rl.cancel("client went away")
			return
		case <-deadline.C:
			rl.cancel("deadline")
			rl.fail(&apiError{Status: http.StatusGatewayTimeout, Type: "server_error", Code: "deadline_exceeded",
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
			if !hopHeaders[k] {
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
			b, err = rl.q.Terminal(ctx, rl.j.ID)
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
	st, gen, err := rl.q.OriginState(ctx, rl.j.ID, rl.j.OToken, false)
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
		ctx, cancel := rl.op()
		b, err := rl.q.Terminal(ctx, rl.j.ID)
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
			if !hopHeaders[k] && k != "Content-Type" {
				h[k] = v
			}
		}
		writeUnary(rl.w, t.Status, t.Body)
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
		rl.fail(&apiError{Status: http.StatusGatewayTimeout, Type: "server_error", Code: "deadline_exceeded",
			Message: "the request waited in the queue past timeouts.request"})
		rl.ack()
	case "dead":
		rl.fail(&apiError{Status: http.StatusBadGateway, Type: "server_error", Code: "job_failed",
			Message: "the job failed on every delivery (queue.max_deliveries) and was dead-lettered: " + string(t.Body)})
	default:
		rl.fail(&apiError{Status: http.StatusBadGateway, Type: "server_error", Code: "job_failed",
			Message: "the job's result was unusable: " + string(t.Body)})
		rl.ack()
	}
}

func (rl *relayJob) ack() {
	rl.settled = true
	ctx, cancel := rl.op()
	_, _, _ = rl.q.OriginState(ctx, rl.j.ID, rl.j.OToken, true)
	cancel()
}

// cancel asks for the job's cancellation (the worker stops its upstream
// call); usage already observed stays settled.
func (rl *relayJob) cancel(why string) {
	rl.settled = true
	ctx, cancel := rl.op()
	st, err := rl.q.Cancel(ctx, rl.j.ID, rl.j.OToken)
	cancel()
	if err == nil && (st == "waiting" || st == "leased") {
		rl.s.Metrics.Queue.Cancellations.Inc()
		rl.s.Log.InfoContext(rl.r.Context(), "queue: job canceled", "job", rl.j.ID, "why", why, "state", st)
	}
}

// fail answers with e, or ends a started stream with it.
func (rl *relayJob) fail(e *apiError) {
	rl.settled = true
	if rl.sw != nil {
		endFailedStream(rl.sw, rl.proto, rl.ep, e.Message)
		return
	}
	writeError(rl.w, rl.proto, e)
}

func (rl *relayJob) failUnavailable(msg string) {
	rl.fail(&apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "queue_unavailable",
		Message: msg + "; retry shortly", RetryAfter: time.Second})
}

// abort ends a started stream with an error event and cancels the job.
func (rl *relayJob) abort(why string) {
	rl.s.Log.WarnContext(rl.r.Context(), "queue: ending the stream", "job", rl.j.ID, "why", why)
	rl.cancel(why)
	if rl.sw == nil {
		rl.failUnavailable(why)
		return
	}
	endFailedStream(rl.sw, rl.proto, rl.ep, why)
}

// QueueOptions are the queue bounds of cfg.
func QueueOptions(cfg *config.Config) queue.Options {
	q := &cfg.Queue
	return queue.Options{Depth: q.Depth, MaxDeliveries: q.MaxDeliveries, Lease: q.Lease.D(), OriginLease: q.OriginLease.D(),
		RetainedJobs: q.RetainedJobs, RetainedBase: q.RetainedBaseBytes, RetainedTerminal: q.RetainedTerminalBytes,
		UnaryTerminal: q.UnaryTerminalBytes, StreamTerminal: q.StreamTerminalBytes, ResultTTL: q.ResultTTL.D(),
		DLQMax: q.DLQMax, DLQBytes: q.DLQBytes, DLQTTL: q.DLQTTL.D()}
}

// Role is which half of distributed execution a replica runs: Ingress
// enqueues its clients' requests, Worker runs jobs (both for role all).
type Role struct{ Ingress, Worker bool }

// String is the role as --role spells it.
func (r Role) String() string {
	switch {
	case r.Ingress && !r.Worker:
		return "ingress"
	case r.Worker && !r.Ingress:
		return "worker"
	}
	return "all"
}

// ParseRole reads --role / SWITCHBOARD_ROLE: ingress, worker or all.
func ParseRole(s string) (Role, error) {
	switch s {
	case "", "all":
		return Role{Ingress: true, Worker: true}, nil
	case "ingress":
		return Role{Ingress: true}, nil
	case "worker":
		return Role{Worker: true}, nil
	}
	return Role{}, fmt.Errorf("role must be ingress, worker or all, got %q", s)
}

// StartQueue joins distributed execution on q with role: the reaper runs on
// every replica, the worker loop on workers. The returned wait blocks
// until the worker has drained after ctx ended.
func (s *Server) StartQueue(ctx context.Context, q *queue.Queue, role Role) (wait func()) {
	s.JoinQueue(q, role)
	go q.Reaper(ctx, max(q.Options().Lease/5, 100*time.Millisecond), s.Log, func(r queue.Reaped) {
		s.Metrics.Queue.Redeliveries.Add(float64(r.Requeued))
		s.Metrics.Queue.Cancellations.Add(float64(r.Canceled))
		if r.Requeued+r.Dead+r.Canceled > 0 {
			s.Log.Info("queue: reaper", "requeued", r.Requeued, "dead_lettered", r.Dead, "canceled", r.Canceled)
		}
	})
	done := make(chan struct{})
	if !role.Worker {
		close(done)
		return func() {}
	}
	conc := 64
	if snap := s.snap.Load(); snap != nil {
		conc = snap.Config.Queue.WorkerConcurrency
	}
	w := &queue.Worker{Q: q, Caps: s.WorkerCaps, Concurrency: conc, Log: s.Log, Run: s.RunJob,
		OnLost: s.Metrics.Queue.LeaseLosses.Inc}
	go func() {
		defer close(done)
		w.Start(ctx)
	}()
	return func() { <-done }
}
