package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"

	"switchboard/internal/admin"
	"switchboard/internal/alerts"
	"switchboard/internal/config"
	"switchboard/internal/proxy"
	"switchboard/internal/tags"
	"switchboard/internal/tracing"
	"switchboard/internal/track"
)

// The server's glue to tracing, tags and alerts, which are packages of
// their own: the handlers call the few functions here.

// observe is the server's tracer, alert notifier and tag state.
type observe struct {
	// tracer is set before serving (SetTracer); nil is off.
	tracer *tracing.Tracer
	// alerts is read by the health hook, which may run on any goroutine.
	alerts atomic.Pointer[alerts.Notifier]
	meter  *tags.Meter
	rules  atomic.Pointer[tagRules]
}

// tagRules are the tags: section compiled.
type tagRules struct {
	policy       *tags.Policy
	fromMetadata bool
}

// SetTracer makes the server trace its requests and their attempts (nil:
// off). Call it before serving.
func (s *Server) SetTracer(t *tracing.Tracer) {
	s.obs.tracer = t
	s.proxy.Tracer = t
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
	if s.adminSvc == nil {
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
	if err := s.adminSvc.Record(ctx, admin.AuditEntry{Actor: "alerts", Action: admin.ActionAlert + ev.Type, Target: target, Fields: f}); err != nil {
		s.Log.Warn("alerts: cannot record an alert in the audit log", "event", ev.Type, "error", err.Error())
	}
}

// applyObserve takes a new config (under s.mu, from Apply).
func (s *Server) applyObserve(cfg *config.Config) {
	s.obs.tracer.Configure(cfg)
	if n := s.obs.alerts.Load(); n != nil {
		n.Configure(cfg.Alerts)
	}
	if s.obs.meter == nil {
		s.obs.meter = tags.NewMeter(s.Metrics.Registry)
	}
	s.obs.meter.Configure(cfg.Tags.MetricKeys, cfg.Tags.MetricValues)
	s.obs.rules.Store(&tagRules{policy: cfg.Tags.TagPolicy(), fromMetadata: cfg.Tags.FromMetadata})
}

// tracedRoutes are the requests that get a server span: the inference
// endpoints (health checks and scrapes would only be noise).
var tracedRoutes = map[string]bool{"/v1/chat/completions": true, "/v1/completions": true, "/v1/responses": true,
	"/v1/embeddings": true, "/v1/messages": true}

// traced starts each inference request's server span (continuing the
// client's traceparent) and ends it with the answer's status. Without a
// tracer it costs one pointer load.
func (s *Server) traced(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := s.obs.tracer
		if t == nil || r.Method != http.MethodPost || !tracedRoutes[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		ctx, span := t.StartRequest(r, r.URL.Path, RequestID(r.Context()))
		if !tracing.Recording(ctx) {
			next.ServeHTTP(w, r.WithContext(ctx)) // sampled out: nothing to record
			return
		}
		tw := &traceWriter{ResponseWriter: w}
		defer func() {
			if tw.status == 0 {
				tw.status = statusClientClosed
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

// requestTags reads the request's tags (the header; the body's metadata
// on chat completions and responses when tags.from_metadata) and checks
// them against the caller's tenant; a refusal is answered (400
// invalid_tags, naming the tag) and reported false.
func (s *Server) requestTags(w http.ResponseWriter, r *http.Request, proto Protocol, in *incoming) bool {
	rules := s.obs.rules.Load()
	if rules == nil {
		return true
	}
	ts, terr := tags.Parse(r.Header.Values(tags.Header))
	if terr == nil && rules.fromMetadata && (r.URL.Path == "/v1/chat/completions" || r.URL.Path == "/v1/responses") {
		if md := gjson.GetBytes(in.body, "metadata"); md.IsObject() {
			ts, terr = ts.Merge(func(yield func(k, v string, isString bool) bool) {
				md.ForEach(func(k, v gjson.Result) bool { return yield(k.Str, v.Str, v.Type == gjson.String) })
			})
		}
	}
	param := tags.Header
	if terr == nil {
		tenantName := ""
		if in.id != nil {
			tenantName = in.id.Tenant
		}
		terr = rules.policy.For(tenantName).Check(ts, param)
	}
	if terr != nil {
		writeError(w, proto, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_tags",
			Param: terr.Param, Message: terr.Message})
		return false
	}
	in.tags = ts
	return true
}

// observed notes an accepted request: who asked for what on its span
// (with its messages when content capture is on), and, for a caller with
// a budget, a budget check once the request ends.
func (s *Server) observed(r *http.Request, in *incoming) {
	ctx := r.Context()
	if tracing.Recording(ctx) {
		tenantName, keyID := "", ""
		if in.id != nil {
			tenantName, keyID = in.id.Label(), in.id.KeyID
		}
		tracing.Caller(ctx, tenantName, keyID, in.model, strings.TrimPrefix(r.URL.Path, "/v1/"), in.tags)
		s.obs.tracer.Input(ctx, in.body)
	}
	if n := s.obs.alerts.Load(); n != nil && in.id != nil && (in.id.Budgeted() || in.id.KeyBudgetNano != nil) {
		release, id := in.release, in.id
		in.release = func() {
			release()
			n.Note(id)
		}
	}
}

// traceStream ends a relayed stream's attempt span: the model and finish
// reasons the events named, its usage, the relay's outcome and the spend
// settled.
func traceStream(res *proxy.Result, st *track.Stream, outcome string) {
	if res.Trace == nil {
		return
	}
	if st != nil {
		res.Trace.Streamed(st.Model, st.Finish, outcome)
		res.Trace.Usage(st.Usage.Input, st.Usage.Output, st.Usage.Known)
	} else {
		res.Trace.Streamed("", nil, outcome)
	}
	if c := res.Permit.Cost(); c > 0 {
		res.Trace.Settled(c)
	}
	res.Trace.End()
}

// traceFallback notes a cross-model fallback on the request's span.
func traceFallback(ctx context.Context, from, to, condition string) {
	if tracing.Recording(ctx) {
		tracing.Event(ctx, "switchboard.fallback", attribute.String("from", from), attribute.String("to", to),
			attribute.String("condition", condition))
	}
}

// jobTrace is the trace a queued job carries: the ingress span's
// traceparent and when it was enqueued (Unix ms, the ingress's clock).
func (s *Server) jobTrace(r *http.Request) (string, int64) {
	tp := tracing.Traceparent(r.Context())
	if tp == "" {
		return "", 0
	}
	return tp, s.Clock.Now().UnixMilli()
}

// overviewAlerts are the latest alerts of the audit log, for /admin.
func (s *Server) overviewAlerts(ctx context.Context) []admin.AuditEntry {
	if s.adminSvc == nil {
		return []admin.AuditEntry{}
	}
	rows, err := s.adminSvc.Recent(ctx, admin.ActionAlert, 20, 2000)
	if err != nil {
		s.Log.Warn("admin overview: cannot read the alerts", "error", fmt.Sprint(err))
		return []admin.AuditEntry{}
	}
	return rows
}

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

// tagKeys are the tag keys the config names: the metric keys first (the
// /admin page shows the first by default), then the keys of every
// tenant's rules, sorted.
func tagKeys(cfg *config.Config) []string {
	var rest []string
	add := func(r *config.TagRules) {
		if r != nil {
			rest = append(append(rest, r.Required...), r.Allowed...)
		}
	}
	add(cfg.Tags.Default)
	for _, r := range cfg.Tags.Tenants {
		add(r)
	}
	slices.Sort(rest)
	keys := slices.Clone(cfg.Tags.MetricKeys)
	for _, k := range slices.Compact(rest) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}
