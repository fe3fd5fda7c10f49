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
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"switchboard/internal/admit"
	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/metrics"
	"switchboard/internal/queue"
	"switchboard/internal/route"
	"switchboard/internal/snapshot"
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
	// Jobs serves a job's request on a worker: the gateway's routes,
	// without the access log and request metrics (the ingress counted the
	// request).
	Jobs http.Handler

	mu      sync.Mutex
	origin  *queue.Origin
	attempt chan struct{} // closed when the running subscription attempt ends
	failed  time.Time     // the last attempt's failure
}

// Join starts the plane: the queue gauges, and an ingress's subscription
// at once (without waiting for it).
func (p *Plane) Join() {
	p.Metrics.WatchQueue(p.State)
	if p.Ingress {
		// Start the attempt without waiting for it (a done context).
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _ = p.originFor(ctx)
	}
}

// State reads the shared queue for the gauges (bounded by the queue's
// operation timeout).
func (p *Plane) State() (metrics.QueueState, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), ingressOp)
	defer cancel()
	st, err := p.Q.Stats(ctx)
	if err != nil {
		return metrics.QueueState{}, false
	}
	// Every configured provider has a series, 0 until it has waited.
	if snap := p.Snap(); snap != nil {
		for name := range snap.Config.Providers {
			if _, ok := st.Waiting[name]; !ok {
				st.Waiting[name] = 0
			}
		}
	}
	return metrics.QueueState{Waiting: st.Waiting, Leased: st.Leased, DLQ: st.DLQ}, true
}

// Detail is the queue section of /v1/health/detail: this replica's role
// and the shared queue's state, or the error that kept it from being read.
func (p *Plane) Detail(ctx context.Context) map[string]any {
	out := map[string]any{"mode": "redis", "role": p.Role.String(), "namespace": queue.Namespace}
	ctx, cancel := context.WithTimeout(ctx, ingressOp)
	defer cancel()
	st, err := p.Q.Stats(ctx)
	if err != nil {
		out["available"], out["error"] = false, "redis does not answer"
		return out
	}
	o := p.Q.Options()
	out["available"] = true
	out["waiting"], out["leased"], out["retained_jobs"], out["dlq"] = st.Waiting, st.Leased, st.Retained, st.DLQ
	out["bytes"] = map[string]int64{"requests": st.BaseBytes, "terminals": st.TerminalBytes, "dlq": st.DLQBytes}
	out["limits"] = map[string]any{"depth": o.Depth, "max_deliveries": o.MaxDeliveries, "lease_seconds": o.Lease.Seconds(),
		"retained_jobs": o.RetainedJobs, "dlq_max": o.DLQMax}
	return out
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

// Start runs the plane until ctx ends: the reaper on every replica, the
// worker loop on workers. The returned wait blocks until the worker has
// drained after ctx ended.
func (p *Plane) Start(ctx context.Context) (wait func()) {
	q := p.Q
	go q.Reaper(ctx, max(q.Options().Lease/5, 100*time.Millisecond), p.Log, func(r queue.Reaped) {
		p.Metrics.Queue.Redeliveries.Add(float64(r.Requeued))
		p.Metrics.Queue.Cancellations.Add(float64(r.Canceled))
		if r.Requeued+r.Dead+r.Canceled > 0 {
			p.Log.Info("queue: reaper", "requeued", r.Requeued, "dead_lettered", r.Dead, "canceled", r.Canceled)
		}
	})
	done := make(chan struct{})
	if !p.Worker {
		close(done)
		return func() {}
	}
	conc := config.QueueDefaults().WorkerConcurrency
	if snap := p.Snap(); snap != nil {
		conc = snap.Config.Queue.WorkerConcurrency
	}
	w := &queue.Worker{Q: q, Caps: p.WorkerCaps, Concurrency: conc, Log: p.Log, Run: p.RunJob,
		OnLost: p.Metrics.Queue.LeaseLosses.Inc}
	go func() {
		defer close(done)
		w.Start(ctx)
	}()
	return func() { <-done }
}
