// Package operator is the operator plane: what the gateway tells about
// itself and how it is administered. It serves the admin API
// (/admin/v1: keys, tenants, audit, usage queries, the overview), the
// /admin and /dashboard pages with their data, /v1/health/detail and
// /v1/usage. Every handler gets the config snapshot and the caller's
// identity from the server's auth, which decided who may call it; it
// shows an admin everything and a tenant its own part. It may call the
// admin service, admission (keys, usage, spend), the usage log, routing
// stats, provider health and front; never the inference plane, the queue
// or the server.
package operator

import (
	"context"
	"log/slog"

	"switchboard/internal/admin"
	"switchboard/internal/admit"
	"switchboard/internal/clock"
	"switchboard/internal/health"
	"switchboard/internal/route"
	"switchboard/internal/usagelog"
)

// Plane is the operator plane's handlers and what they read. The server
// sets every field before the first request (Admin and QueueDetail as the
// store and the queue are opened).
type Plane struct {
	Log    *slog.Logger
	Clock  clock.Clock
	Health *health.Registry
	Stats  *route.Stats
	// Selector orders a model's providers as its requests would go.
	Selector  *route.Selector
	Admission *admit.Controller
	// Admin runs the admin API's changes (nil: no admin store is open,
	// and the admin API answers 503).
	Admin *admin.Service
	// UsageLog is the per-request usage log (nil: off).
	UsageLog func() *usagelog.Log
	// Draining reports a shutdown under way (health detail's status).
	Draining func() bool
	// QueueDetail is the queue section of health detail (nil: the queue
	// is off).
	QueueDetail func(context.Context) map[string]any
}
