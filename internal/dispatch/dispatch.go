// Package dispatch is queue dispatch, the distributed execution of
// queue.mode: redis. Its ingress enqueues a request the inference plane has
// authenticated, parsed and routed, and relays the answer a worker
// publishes exactly as a local answer would have been written; its worker
// leases jobs and serves each through the handler the server gives it
// (Jobs), so a job runs the same attempt loop as a local request. It may
// call the queue, the config snapshot it is handed, admission (a job's key
// digest) and front; it never calls the server or a plane above it.
package dispatch

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"switchboard/internal/admit"
	"switchboard/internal/clock"
	"switchboard/internal/metrics"
	"switchboard/internal/queue"
	"switchboard/internal/route"
	"switchboard/internal/snapshot"
	"switchboard/internal/tracing"
)

// Plane is one replica's part in distributed execution: the ingress, the
// worker or both (Role). A server with queue.mode off has none.
type Plane struct {
	Q *queue.Queue
	Role
	Log     *slog.Logger
	Clock   clock.Clock
	Metrics *metrics.Metrics
	// Snap is the config snapshot in force (nil before the first Apply).
	Snap func() *snapshot.Snapshot
	// Selector orders a request's providers; the first one's queue is
	// where its job waits.
	Selector *route.Selector
	// Admission authenticates a job's key digest on a worker.
	Admission *admit.Controller
	// Jobs serves a job's request on a worker: the inference plane's
	// model endpoints, which read the job's identity from JobOf.
	Jobs http.Handler
	// Tracer continues a job's trace on a worker (nil: off).
	Tracer *tracing.Tracer

	mu      sync.Mutex
	origin  *queue.Origin
	attempt chan struct{} // closed when the running subscription attempt ends
	failed  time.Time     // the last attempt's failure
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

// ingressOp bounds one queue call of an ingress (and of the gauges and
// health detail). Every Redis command is also bounded by
// redis.command_timeout; this covers a pool wait and a reconnect. Unlike a
// worker's transitions it is not tied to the lease: an ingress holds none.
const ingressOp = 5 * time.Second
