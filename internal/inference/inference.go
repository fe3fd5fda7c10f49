// Package inference is the inference plane: the /v1 endpoints that serve
// model requests (chat, completions, responses, embeddings, Anthropic
// messages, the model list). A handler gets an authenticated request from
// the server with its config snapshot and identity; it reads and checks
// the body, admits it, runs it under its Idempotency-Key, hands it to
// queue dispatch or runs the attempt loop here (with the model's
// fallbacks), and relays the answer in the client's protocol, measuring
// and settling it on the way; every request leaves a usage row. It may
// call the proxy's attempt loop, routing, admission, idempotency, queue
// dispatch, the usage log and front; never the server or the operator
// plane.
package inference

import (
	"log/slog"
	"net/http"

	"switchboard/internal/admit"
	"switchboard/internal/alerts"
	"switchboard/internal/clock"
	"switchboard/internal/dispatch"
	"switchboard/internal/idempotency"
	"switchboard/internal/metrics"
	"switchboard/internal/proxy"
	"switchboard/internal/route"
	"switchboard/internal/snapshot"
	"switchboard/internal/tags"
	"switchboard/internal/tenant"
	"switchboard/internal/tracing"
	"switchboard/internal/usagelog"
)

// Plane is the inference plane's handlers and what they use. The server
// sets every field before the first request (Dispatch when it joins the
// queue).
type Plane struct {
	Log     *slog.Logger
	Clock   clock.Clock
	Metrics *metrics.Metrics
	Stats   *route.Stats
	Prober  *route.Prober
	// Selector orders a model's providers for one request.
	Selector *route.Selector
	// Proxy is the attempt loop.
	Proxy     *proxy.Proxy
	Admission *admit.Controller
	// Idempotency stores answers by Idempotency-Key (nil: the header is
	// ignored).
	Idempotency idempotency.Store
	// Dispatch enqueues requests (nil: every request runs here).
	Dispatch *dispatch.Plane
	// Snap is the config snapshot in force.
	Snap func() *snapshot.Snapshot
	// UsageLog is the per-request usage log (nil: off).
	UsageLog func() *usagelog.Log
	// Cutting reports that the drain bound was reached and the remaining
	// connections are being closed: streams ending now were cut.
	Cutting func() bool
	// Tracer traces requests (nil: off); the server's front starts each
	// request's span, the plane annotates it.
	Tracer *tracing.Tracer
	// Meter counts spend by the configured tag keys.
	Meter *tags.Meter
	// Alerts is the budget alert notifier (nil, or returning nil: off).
	Alerts func() *alerts.Notifier
}

// incoming is one parsed client request holding a preparation slot.
type incoming struct {
	snap    *snapshot.Snapshot
	id      *tenant.Identity
	body    []byte
	model   string
	stream  bool
	rt      *route.Route
	release func()
	// tags are the request's (X-Switchboard-Tags, metadata), checked.
	tags tags.Set
}

// queued reports whether this request is to be enqueued rather than run
// here: queue mode, and not already a job a worker is running.
func (s *Plane) queued(r *http.Request) bool {
	return s.Dispatch != nil && dispatch.JobOf(r.Context()) == nil
}
