package tracing

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"switchboard/internal/config"
	"switchboard/internal/tags"
)

// propagator is W3C trace context only: baggage is the client's and is
// not sent on to providers.
var propagator = propagation.TraceContext{}

// Switchboard's own attributes.
const (
	keyRequestID = attribute.Key("switchboard.request_id")
	keyTenant    = attribute.Key("switchboard.tenant")
	keyKeyID     = attribute.Key("switchboard.key_id")
	keyModel     = attribute.Key("switchboard.model")
	keyProvName  = attribute.Key("switchboard.provider")
	keyAttempt   = attribute.Key("switchboard.attempt")
	keyHedge     = attribute.Key("switchboard.hedge")
	keyCost      = attribute.Key("switchboard.cost_nano_usd")
	keyReserved  = attribute.Key("switchboard.reserved_nano_usd")
	keyJob       = attribute.Key("switchboard.job_id")
	tagPrefix    = "switchboard.tag."
)

// Configure notes each provider's GenAI name and host (on every config
// applied).
func (t *Tracer) Configure(cfg *config.Config) {
	if t == nil {
		return
	}
	m := make(map[string]providerInfo, len(cfg.Providers))
	for name, p := range cfg.Providers {
		m[name] = describe(p)
	}
	t.providers.Store(&m)
}

func (t *Tracer) provider(name string) providerInfo {
	if m := t.providers.Load(); m != nil {
		if p, ok := (*m)[name]; ok {
			return p
		}
	}
	return providerInfo{system: "openai"}
}

// StartRequest starts the server span of a client request, continuing
// the client's traceparent when it sent one. The span is in the returned
// context; End it with the answer's status.
func (t *Tracer) StartRequest(r *http.Request, route, requestID string) (context.Context, *Request) {
	if t == nil {
		return r.Context(), nil
	}
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, s := t.t.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", route),
			keyRequestID.String(requestID)))
	return ctx, &Request{s: s, content: t.content}
}

// Request is a client request's server span; nil when not tracing.
type Request struct {
	s       trace.Span
	content bool
}

// End records the answer's status and ends the span.
func (r *Request) End(status int) {
	if r == nil {
		return
	}
	r.s.SetAttributes(keyHTTPStatus.Int(status)) // the span's one call after its start: attributes are deduplicated per call
	if status >= 500 {
		r.s.SetStatus(codes.Error, http.StatusText(status))
	}
	r.s.End()
}

// Recording reports whether ctx's span records (cheap; check it before
// building attributes).
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// Event adds an event to ctx's span, when it records.
func Event(ctx context.Context, name string, kv ...attribute.KeyValue) {
	if s := trace.SpanFromContext(ctx); s.IsRecording() {
		s.AddEvent(name, trace.WithAttributes(kv...))
	}
}

// Annotate sets attributes on ctx's span, when it records.
func Annotate(ctx context.Context, kv ...attribute.KeyValue) {
	if s := trace.SpanFromContext(ctx); s.IsRecording() {
		s.SetAttributes(kv...)
	}
}

// Caller notes who asked for what on ctx's span: tenant, key id, the
// model asked for, the operation and the request's tags.
func Caller(ctx context.Context, tenant, keyID, model, endpoint string, ts tags.Set) {
	s := trace.SpanFromContext(ctx)
	if !s.IsRecording() {
		return
	}
	kv := make([]attribute.KeyValue, 0, 3+len(ts))
	kv = append(kv, keyTenant.String(tenant), keyKeyID.String(keyID), keyRequestModel.String(model))
	for _, tg := range ts {
		kv = append(kv, attribute.String(tagPrefix+tg.Key, tg.Value))
	}
	s.SetAttributes(kv...)
}

// Input puts the request's messages on ctx's span when content capture
// is on.
func (t *Tracer) Input(ctx context.Context, body []byte) {
	if !t.CaptureContent() {
		return
	}
	if s := trace.SpanFromContext(ctx); s.IsRecording() {
		if in := inputOf(body); in != "" {
			s.SetAttributes(keyInputMessages.String(in))
		}
	}
}

// Inject writes ctx's span as traceparent into h (an upstream request's
// own header map). Nothing is written without a span.
func Inject(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// Traceparent is ctx's span as a traceparent value ("" without one), for
// a queued job's envelope.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	h := http.Header{}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
	return h.Get("Traceparent")
}

// Job continues an ingress's trace on the worker that runs its job: a
// span for the time the job waited in the queue (from enqueued to
// leased), then the worker's span, which the attempts are children of.
// traceparent is the envelope's ("" starts a new trace).
func (t *Tracer) Job(ctx context.Context, traceparent, route, jobID string, enqueued, leased time.Time) (context.Context, *Request) {
	if t == nil {
		return ctx, nil
	}
	if traceparent != "" {
		ctx = propagator.Extract(ctx, propagation.HeaderCarrier(http.Header{"Traceparent": {traceparent}}))
	}
	if enqueued.Unix() > 0 && leased.After(enqueued) {
		_, w := t.t.Start(ctx, "queue wait", trace.WithTimestamp(enqueued), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(keyJob.String(jobID)))
		w.End(trace.WithTimestamp(leased))
	}
	ctx, s := t.t.Start(ctx, "job "+route, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(keyJob.String(jobID), attribute.String("http.route", route)))
	return ctx, &Request{s: s, content: t.content}
}

// AttemptInfo describes one provider attempt.
type AttemptInfo struct {
	// Provider is the provider's config name; Model the provider's model
	// name (gen_ai.request.model); GatewayModel the gateway model served
	// and RequestModel the one the client asked for.
	Provider, Model, GatewayModel, RequestModel string
	// Endpoint is the OpenAI endpoint (or "messages") sent.
	Endpoint string
	Stream   bool
	// Retry counts earlier attempts on this provider in this round.
	Retry int
	// Hedge: the attempt runs beside another (a hedged race's extra).
	Hedge bool
}

// Attempt is one provider attempt's client span; nil when not tracing.
// A unary attempt ends in the attempt loop; a stream's when its relay
// ends. End may be called more than once.
type Attempt struct {
	s        trace.Span
	endpoint string
	content  bool
	ended    atomic.Bool
	reserved int64 // admission's reservation, set before the answer
}

// StartAttempt starts an attempt's span under ctx's (the request's). The
// returned context carries it: the upstream request's traceparent.
func (t *Tracer) StartAttempt(ctx context.Context, a AttemptInfo) (context.Context, *Attempt) {
	if t == nil || !trace.SpanFromContext(ctx).IsRecording() {
		// Not traced, or sampled out: no child span (the request's own
		// span context, when there is one, still goes upstream).
		return ctx, nil
	}
	p := t.provider(a.Provider)
	kv := make([]attribute.KeyValue, 0, 8)
	kv = append(kv, keyOperation.String(Operation(a.Endpoint)), keyProvider.String(p.system),
		keyRequestModel.String(a.Model), keyProvName.String(a.Provider))
	// Only what differs from the usual case: every attribute is
	// marshalled with every span, and export is most of tracing's cost.
	if a.GatewayModel != a.RequestModel {
		kv = append(kv, keyModel.String(a.GatewayModel)) // a cross-model fallback's
	}
	if p.host != "" && p.system == "openai" && !p.known {
		kv = append(kv, keyServerAddress.String(p.host)) // which OpenAI-compatible server
	}
	if a.Retry > 0 {
		kv = append(kv, keyAttempt.Int(a.Retry))
	}
	if a.Stream {
		kv = append(kv, attribute.Bool("gen_ai.request.stream", true))
	}
	if a.Hedge {
		kv = append(kv, keyHedge.Bool(true))
	}
	ctx, s := t.t.Start(ctx, Operation(a.Endpoint)+" "+a.Model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(kv...))
	if !s.IsRecording() {
		s.End()
		return ctx, nil
	}
	return ctx, &Attempt{s: s, endpoint: a.Endpoint, content: t.content}
}

// Admitted notes the admission decision that let the attempt go: what
// it reserved (an attribute: on the usual path an event would cost as
// much again to export; a refusal is an event).
func (a *Attempt) Admitted(reservedNano int64) {
	if a == nil || reservedNano <= 0 {
		return
	}
	a.reserved = reservedNano
}

// Refused ends an attempt the gateway itself refused before sending.
func (a *Attempt) Refused(code, scope string) {
	if a == nil {
		return
	}
	a.s.AddEvent("switchboard.admission", trace.WithAttributes(attribute.String("decision", "refused"),
		attribute.String("code", code), attribute.String("scope", scope)))
	a.s.SetAttributes(keyErrorType.String(code))
	a.End()
}

// Failed records how a sent attempt failed (status 0: no answer).
func (a *Attempt) Failed(status int, reason string) {
	if a == nil {
		return
	}
	if status > 0 {
		a.s.SetAttributes(keyHTTPStatus.Int(status))
	}
	a.s.SetAttributes(keyErrorType.String(reason))
	a.s.SetStatus(codes.Error, reason)
}

// Answer reads a unary answer's model, id, finish reasons and (with
// content capture) its choices, plus its usage and the spend settled
// (cost < 0: none), in one call.
func (a *Attempt) Answer(body []byte, input, output int64, known bool, cost int64) {
	if a == nil {
		return
	}
	kv := make([]attribute.KeyValue, 0, 8)
	kv = append(kv, keyHTTPStatus.Int(http.StatusOK))
	kv = answer(kv, a.endpoint, body)
	if a.content {
		if out := outputOf(body); out != "" {
			kv = append(kv, keyOutputMsgs.String(out))
		}
	}
	if known {
		kv = append(kv, keyInputTokens.Int64(input), keyOutputTokens.Int64(output))
	}
	if cost >= 0 {
		kv = append(kv, keyCost.Int64(cost)) // the spend settled
	}
	a.s.SetAttributes(kv...)
}

// Usage sets the token counts the provider reported.
func (a *Attempt) Usage(input, output int64, known bool) {
	if a == nil || !known {
		return
	}
	a.s.SetAttributes(keyInputTokens.Int64(input), keyOutputTokens.Int64(output))
}

// Streamed notes a relayed stream's end: what answered, why it finished,
// and how the relay ended (completed, abandoned, cut, failed).
func (a *Attempt) Streamed(model string, reasons []string, outcome string) {
	if a == nil {
		return
	}
	kv := []attribute.KeyValue{keyHTTPStatus.Int(http.StatusOK), attribute.String("switchboard.stream.outcome", outcome)}
	if model != "" {
		kv = append(kv, keyResponseModel.String(model))
	}
	if len(reasons) > 0 {
		kv = append(kv, keyFinish.StringSlice(reasons))
	}
	a.s.SetAttributes(kv...)
	if outcome == "failed" || outcome == "cut" {
		a.s.SetStatus(codes.Error, "stream "+outcome)
	}
}

// Settled notes the attempt's settled spend (nano-USD).
func (a *Attempt) Settled(costNano int64) {
	if a == nil {
		return
	}
	a.s.SetAttributes(keyCost.Int64(costNano))
}

// End ends the span (once), with what admission reserved.
func (a *Attempt) End() {
	if a == nil || a.ended.Swap(true) {
		return
	}
	if a.reserved > 0 {
		a.s.SetAttributes(keyReserved.Int64(a.reserved))
	}
	a.s.End()
}
