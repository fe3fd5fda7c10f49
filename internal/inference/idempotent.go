package inference

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"switchboard/internal/dispatch"
	"switchboard/internal/front"
	"switchboard/internal/idempotency"
)

// Idempotency-Key: a repeat within idempotency.ttl with the same body
// gets the stored answer (header Idempotent-Replayed: true) and calls no
// provider; the same key with another body is 422; a duplicate arriving
// while the first runs waits for it. Keys are scoped to tenant and
// endpoint. Only complete answers are stored: not 5xx or 429 (a retry
// should run again), not a stream that failed or lost its client.

// maxIdempotencyKey bounds the header (Stripe's limit).
const maxIdempotencyKey = 255

// idempotent runs serve under in's Idempotency-Key, if any, or answers by
// itself (replay, conflict, bad key, wait over) without calling serve.
func (s *Plane) idempotent(w http.ResponseWriter, r *http.Request, proto front.Protocol, in *incoming, serve func(http.ResponseWriter)) {
	keys := r.Header.Values("Idempotency-Key")
	if len(keys) == 0 || s.Idempotency == nil || dispatch.JobOf(r.Context()) != nil {
		serve(w)
		return
	}
	// Two lines (or an empty one) name no single key: taking the first
	// would replay one request's answer for another the client meant to
	// run apart, so the ambiguity is refused.
	key := keys[0]
	if len(keys) > 1 {
		e := front.Invalid("send Idempotency-Key once: this request has several")
		e.Param = "Idempotency-Key"
		front.WriteError(w, proto, e)
		return
	}
	if key == "" || len(key) > maxIdempotencyKey || strings.ContainsFunc(key, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
		e := front.Invalid("Idempotency-Key must be 1 to 255 printable ASCII characters")
		e.Param = "Idempotency-Key"
		front.WriteError(w, proto, e)
		return
	}
	label, ledger := "", ""
	if in.id != nil {
		label, ledger = in.id.Label(), in.id.Tenant
	}
	scope := sha256.Sum256([]byte(label + "\x00" + r.URL.Path + "\x00" + key))
	// The tenant's ledger name places the record with the tenant's other
	// shared state (on Redis, in its Cluster slot).
	skey := idempotency.Key{Tenant: ledger, Scope: hex.EncodeToString(scope[:])}
	bh := sha256.Sum256(in.body)
	hash := hex.EncodeToString(bh[:])
	deadline := s.Clock.Now().Add(in.snap.Config.Timeouts.Request.D())
	lease := max(in.snap.Config.Idempotency.Lease.D(), time.Second) // validated; never a zero lease
	for {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		st, rec, tok, err := s.Idempotency.Claim(ctx, skey, hash, lease)
		cancel()
		switch {
		case err != nil:
			s.Log.WarnContext(r.Context(), "idempotency store unavailable", "error", err.Error())
			front.WriteError(w, proto, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "idempotency_unavailable",
				Message: "the Idempotency-Key store is unavailable; retry shortly", RetryAfter: time.Second})
			return
		case st == idempotency.Replay:
			// Served to any key of the tenant: it is still a request of
			// this key, within its own limits (no provider is called).
			if ref := s.Admission.AdmitReplay(r.Context(), in.id, in.model); ref != nil {
				s.writeRefusal(w, proto, in.id, ref)
				return
			}
			s.Metrics.Queue.IdempotentReplays.Inc()
			replay(w, rec)
			return
		case st == idempotency.Conflict:
			front.WriteError(w, proto, &front.Error{Status: http.StatusUnprocessableEntity, Type: "invalid_request_error",
				Code: "idempotency_key_reused", Param: "Idempotency-Key",
				Message: "this Idempotency-Key was already used with a different request body"})
			return
		case st == idempotency.Fresh:
			s.runRecorded(w, r, skey, tok, in.snap.Config.Idempotency.MaxBytes, lease, serve)
			return
		}
		// Pending: the first request is still running; wait for its answer.
		if s.Clock.Now().After(deadline) {
			front.WriteError(w, proto, &front.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "idempotency_key_in_use",
				Message: "a request with this Idempotency-Key is still running", RetryAfter: time.Second})
			return
		}
		poll, stop := s.Clock.After(25 * time.Millisecond)
		select {
		case <-poll:
		case <-r.Context().Done():
			stop()
			return
		}
	}
}

// runRecorded serves and stores the answer under the claim, if it is at
// most limit bytes (idempotency.max_bytes), renewing the claim's lease
// while serve runs. A complete answer is stored even when its client hung
// up the moment it had it: the answer exists, and the client's retry
// must find it.
func (s *Plane) runRecorded(w http.ResponseWriter, r *http.Request, skey idempotency.Key, tok string, limit int64, lease time.Duration, serve func(http.ResponseWriter)) {
	rw := &recorder{ResponseWriter: w, body: front.AnswerBuffer{Limit: limit}}
	stop := s.renewClaim(r, skey, tok, lease)
	serve(rw)
	stop()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Second)
	defer cancel()
	if !rw.storable() {
		if err := s.Idempotency.Release(ctx, skey, tok); err != nil {
			s.Log.WarnContext(r.Context(), "idempotency: cannot release a key", "error", err.Error())
		}
		return
	}
	rec := &idempotency.Record{Status: rw.status, Header: replayHeaders(rw.Header()), Body: rw.body.Bytes()}
	if _, err := s.Idempotency.Finish(ctx, skey, tok, rec); err != nil {
		s.Log.WarnContext(r.Context(), "idempotency: answer not stored", "error", err.Error())
	}
}

// renewClaim renews a claim every third of its lease until stop is
// called: a live owner keeps its key however long the request runs, a
// dead one (kill -9) loses it within one lease. A claim found lost is
// logged; the request goes on (its answer is then not stored).
//
// The ticks are real time, not s.Clock: the lease runs out on the
// store's clock (Redis's own, or the process's), which no fake clock
// moves.
func (s *Plane) renewClaim(r *http.Request, skey idempotency.Key, tok string, lease time.Duration) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), lease/3)
			ok, err := s.Idempotency.Renew(ctx, skey, tok, lease)
			cancel()
			switch {
			case err != nil:
				// The next tick retries: the lease may outlive a blip.
				s.Log.WarnContext(r.Context(), "idempotency: cannot renew a claim", "error", err.Error())
			case !ok:
				s.Log.WarnContext(r.Context(), "idempotency: the claim lapsed while its request ran; its answer will not be stored")
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

// replayHeaders are the answer's headers minus those that describe this
// response only (its request id, length, rate-limit state).
func replayHeaders(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		switch {
		case k == "X-Request-Id", k == "Content-Length", k == "Retry-After", k == "Date",
			strings.HasPrefix(k, "X-Switchboard-Ratelimit"), strings.HasPrefix(k, "X-Ratelimit"):
			continue
		}
		out[k] = v
	}
	return out
}

func replay(w http.ResponseWriter, rec *idempotency.Record) {
	h := w.Header()
	for k, v := range rec.Header {
		h[k] = v
	}
	h.Set("Idempotent-Replayed", "true")
	if strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		w.WriteHeader(rec.Status)
		_, _ = w.Write(rec.Body)
		return
	}
	front.WriteUnary(w, rec.Status, rec.Body)
}

// recorder tees an answer (bounded) for storing.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	body   front.AnswerBuffer
}

func (w *recorder) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Answered passes the metrics hook through (see statusWriter).
func (w *recorder) Answered() {
	if a, ok := w.ResponseWriter.(interface{ Answered() }); ok {
		a.Answered()
	}
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// storable: a complete answer worth replaying.
func (w *recorder) storable() bool {
	if !w.wrote || w.body.Over() || w.status >= 500 || w.status == http.StatusTooManyRequests {
		return false
	}
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		return true
	}
	return streamComplete(w.body.Bytes())
}

// streamComplete: the stream ended as a successful one does in its
// protocol, with no error event.
func streamComplete(b []byte) bool {
	s := string(b)
	if strings.Contains(s, "event: error") || strings.Contains(s, `data: {"error"`) || strings.Contains(s, "response.failed") {
		return false
	}
	return strings.HasSuffix(s, "data: [DONE]\n\n") || strings.Contains(s, "event: message_stop") ||
		strings.Contains(s, "response.completed")
}
