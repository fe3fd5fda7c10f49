package server

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"

	"switchboard/internal/admin"
	"switchboard/internal/alerts"
	"switchboard/internal/config"
	"switchboard/internal/front"
	"switchboard/internal/tags"
	"switchboard/internal/tracing"
)

// The front's part of tracing, tags and alerts, which are packages of
// their own: it starts each inference request's span, hands the tracer,
// the tag meter and the alert notifier to the planes, and records alerts
// in the audit log. The planes' parts are in inference/observe.go
// (tags, the request's span, budget checks), dispatch (a job's trace) and
// operator/observe.go (/admin's alerts and tag keys).

// observe is the server's tracer, alert notifier and tag meter.
type observe struct {
	// tracer is set before serving (SetTracer); nil is off.
	tracer *tracing.Tracer
	// alerts is read by the health hook, which may run on any goroutine.
	alerts atomic.Pointer[alerts.Notifier]
	meter  *tags.Meter
}

// SetTracer makes the server trace its requests and their attempts (nil:
// off). Call it before serving.
func (s *Server) SetTracer(t *tracing.Tracer) {
	s.obs.tracer = t
	s.proxy.Tracer = t
	s.inf.Tracer = t
	if s.queueing != nil {
		s.queueing.Tracer = t
	}
	if snap := s.snap.Load(); snap != nil {
		t.Configure(snap.Config)
	}
}

// Tracer is the server's tracer (nil: off).
func (s *Server) Tracer() *tracing.Tracer { return s.obs.tracer }

// SetAlerts makes the server feed n: the budgets of callers that made
// requests, and its providers' circuit openings. Alerts are recorded in
// the admin audit log when an admin store is open.
func (s *Server) SetAlerts(n *alerts.Notifier) {
	s.obs.alerts.Store(n)
	if snap := s.snap.Load(); snap != nil {
		n.Configure(snap.Config.Alerts)
	}
}

// RecordAlert writes an alert's outcome to the audit log (alerts.Options.Record).
func (s *Server) RecordAlert(ctx context.Context, ev alerts.Event, delivered bool, attempts int, why string) {
	if s.op.Admin == nil {
		return
	}
	target := "queue"
	switch {
	case ev.KeyID != "":
		target = "key:" + ev.KeyID
	case ev.Tenant != "":
		target = "tenant:" + ev.Tenant
	case ev.Provider != "":
		target = "provider:" + ev.Provider
	}
	f := map[string]any{"id": ev.ID, "message": ev.Message, "delivered": delivered, "attempts": attempts}
	if why != "" {
		f["error"] = why
	}
	if ev.ThresholdPct > 0 {
		f["threshold_pct"], f["used_pct"] = ev.ThresholdPct, ev.UsedPct
	}
	if err := s.op.Admin.Record(ctx, admin.AuditEntry{Actor: "alerts", Action: admin.ActionAlert + ev.Type, Target: target, Fields: f}); err != nil {
		s.Log.Warn("alerts: cannot record an alert in the audit log", "event", ev.Type, "error", err.Error())
	}
}

// applyObserve takes a new config (under s.mu, from Apply).
func (s *Server) applyObserve(cfg *config.Config) {
	s.obs.tracer.Configure(cfg)
	if n := s.obs.alerts.Load(); n != nil {
		n.Configure(cfg.Alerts)
	}
	s.obs.meter.Configure(cfg.Tags.MetricKeys, cfg.Tags.MetricValues)
}

// traced starts the server span of each request to the inference plane's
// model endpoints (continuing the client's traceparent) and ends it with
// the answer's status; health checks and scrapes would only be noise.
// Without a tracer it costs one pointer load.
func (s *Server) traced(next http.Handler) http.Handler {
	routes := map[string]bool{}
	for _, rt := range s.inf.Routes() {
		routes[rt.Path] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := s.obs.tracer
		if t == nil || r.Method != http.MethodPost || !routes[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		ctx, span := t.StartRequest(r, r.URL.Path, front.RequestID(r.Context()))
		if !tracing.Recording(ctx) {
			next.ServeHTTP(w, r.WithContext(ctx)) // sampled out: nothing to record
			return
		}
		tw := &traceWriter{ResponseWriter: w}
		defer func() {
			if tw.status == 0 {
				tw.status = front.StatusClientClosed
			}
			span.End(tw.status)
		}()
		next.ServeHTTP(tw, r.WithContext(ctx))
	})
}

// traceWriter notes the answer's status for the span.
type traceWriter struct {
	http.ResponseWriter
	status int
}

func (w *traceWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *traceWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *traceWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Answered passes the metrics' early count through (see statusWriter).
func (w *traceWriter) Answered() {
	if a, ok := w.ResponseWriter.(interface{ Answered() }); ok {
		a.Answered()
	}
}

func (w *traceWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// errNoQueue: the DLQ is read in queue mode only.
var errNoQueue = fmt.Errorf("queue.mode is off")

// DLQSize reads the dead-letter queue's size (alerts.Options.DLQ).
func (s *Server) DLQSize(ctx context.Context) (int64, error) {
	if s.queueing == nil {
		return 0, errNoQueue
	}
	st, err := s.queueing.Q.Stats(ctx)
	return st.DLQ, err
}
