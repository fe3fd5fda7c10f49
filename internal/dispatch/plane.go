package dispatch

import (
	"context"
	"maps"
	"slices"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/metrics"
	"switchboard/internal/queue"
)

// Join starts the plane: the queue gauges, and an ingress's subscription
// at once (without waiting for it).
func (p *Plane) Join() {
	// The queues to reap, count and check are the providers of the
	// config in force (and the directory's).
	p.Q.SetProviders(p.providerNames)
	p.Metrics.WatchQueue(p.State)
	if p.Ingress {
		// Start the attempt without waiting for it (a done context).
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _ = p.originFor(ctx)
	}
}

// providerNames lists the running config's providers.
func (p *Plane) providerNames() []string {
	snap := p.Snap()
	if snap == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(snap.Config.Providers))
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
	// The bounds are each provider queue's.
	out["limits"] = map[string]any{"per": "provider queue", "depth": o.Depth, "max_deliveries": o.MaxDeliveries,
		"lease_seconds": o.Lease.Seconds(), "retained_jobs": o.RetainedJobs, "dlq_max": o.DLQMax}
	return out
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
