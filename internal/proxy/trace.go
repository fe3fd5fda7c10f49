package proxy

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"switchboard/internal/admit"
	"switchboard/internal/provider"
	"switchboard/internal/route"
	"switchboard/internal/tracing"
)

// The attempt loop's part of tracing (see Proxy.Tracer): each attempt a
// client span, each decision of the loop an event on the request's span.
// Every hook is a no-op when the request's span does not record.

// traceAttempt starts the attempt's span; the context it returns carries
// it to the provider, whose upstream request sends it as traceparent.
func (p *Proxy) traceAttempt(ctx context.Context, c *Call, cand *route.Candidate, req *provider.Request, retry int) (context.Context, *tracing.Attempt) {
	if p.Tracer == nil {
		return ctx, nil
	}
	return p.Tracer.StartAttempt(ctx, tracing.AttemptInfo{Provider: cand.Provider, Model: cand.Model, GatewayModel: modelOf(c), RequestModel: c.ClientModel,
		Endpoint: string(req.Endpoint), Stream: c.Stream, Retry: retry, Hedge: c.side != nil && c.side.hedge})
}

// traceAdmission records the attempt's admission decision.
func traceAdmission(sp *tracing.Attempt, pm *admit.Permit, ref *admit.Refusal) {
	switch {
	case sp == nil:
	case ref != nil:
		sp.Refused(ref.Code, ref.Scope.String())
	case pm != nil:
		sp.Admitted(pm.Reserved())
	}
}

// traceOutcome records how the attempt ended and ends its span, except a
// committed stream's: the relay ends that one (Result.Trace).
func traceOutcome(sp *tracing.Attempt, res *Result, perr *provider.Error, pm *admit.Permit) {
	if sp == nil {
		return
	}
	cost := int64(-1)
	if pm != nil {
		cost = pm.Cost()
	}
	switch {
	case perr != nil:
		sp.Failed(perr.Status, Reason(perr))
		if cost > 0 {
			sp.Settled(cost) // a failure the provider billed
		}
	case res.Events != nil:
		res.Trace = sp
		return
	default:
		u := res.Usage
		sp.Answer(res.Body, u.Input, u.Output, u.Known, cost)
	}
	sp.End()
}

// traceRetry notes a retry on the same provider after wait.
func traceRetry(ctx context.Context, cand *route.Candidate, attempt int, reason string, wait time.Duration) {
	if tracing.Recording(ctx) {
		tracing.Event(ctx, "switchboard.retry", attribute.String("provider", cand.Provider), attribute.Int("attempt", attempt+1),
			attribute.String("reason", reason), attribute.Int64("wait_ms", wait.Milliseconds()))
	}
}

// tracePause notes a provider paused by a quota answer.
func tracePause(ctx context.Context, cand *route.Candidate, reason string) {
	if tracing.Recording(ctx) {
		tracing.Event(ctx, "switchboard.provider.paused", attribute.String("provider", cand.Provider), attribute.String("reason", reason))
	}
}

// traceCircuit notes a circuit decision about a provider: skipped
// (open, half-open probe taken, paused), opened by this request's
// failures, or forced (every provider unavailable: all are tried).
func traceCircuit(ctx context.Context, provider, decision string) {
	if tracing.Recording(ctx) {
		tracing.Event(ctx, "switchboard.circuit", attribute.String("provider", provider), attribute.String("decision", decision))
	}
}

// traceUnavailable notes the providers of order that a round leaves out.
func (p *Proxy) traceUnavailable(ctx context.Context, order, cands []*route.Candidate, forced bool) {
	if p.Health == nil || !tracing.Recording(ctx) {
		return
	}
	if forced {
		traceCircuit(ctx, "*", "forced")
		return
	}
	if len(cands) == len(order) {
		return
	}
	for _, c := range order {
		if st := p.Health.Status(c.Provider); st.CircuitOpen {
			traceCircuit(ctx, c.Provider, "skipped_open")
		} else if !st.PausedUntil.IsZero() {
			traceCircuit(ctx, c.Provider, "skipped_paused")
		}
	}
}

// traceHedge notes a hedge started beside an attempt, or a race's winner.
func traceHedge(ctx context.Context, what, provider string, after time.Duration) {
	if tracing.Recording(ctx) {
		tracing.Event(ctx, "switchboard.hedge", attribute.String("what", what), attribute.String("provider", provider),
			attribute.Int64("after_ms", after.Milliseconds()))
	}
}
