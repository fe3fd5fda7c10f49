package server

import (
	"context"

	"switchboard/internal/admin"
	"switchboard/internal/dispatch"
	"switchboard/internal/idempotency"
	"switchboard/internal/queue"
	"switchboard/internal/tenant"
	"switchboard/internal/usagelog"
)

// What the planes are handed after New: the stores the command opens and
// distributed execution. Each is set before the first request.

// JoinQueue switches the server to distributed execution on q; an
// ingress starts its subscription at once.
func (s *Server) JoinQueue(q *queue.Queue, role dispatch.Role) {
	s.queueing = &dispatch.Plane{Q: q, Role: role, Log: s.Log, Clock: s.Clock, Metrics: s.Metrics, Snap: s.Snapshot,
		Selector: s.selector, Admission: s.admission(), Jobs: s.inf.Jobs(), Tracer: s.obs.tracer}
	s.op.QueueDetail = s.queueing.Detail
	s.inf.Dispatch = s.queueing
	s.queueing.Join()
}

// StartQueue joins distributed execution on q with role: the reaper runs on
// every replica, the worker loop on workers. The returned wait blocks
// until the worker has drained after ctx ended.
func (s *Server) StartQueue(ctx context.Context, q *queue.Queue, role dispatch.Role) (wait func()) {
	s.JoinQueue(q, role)
	return s.queueing.Start(ctx)
}

// SetUsageLog sets the per-request usage log (nil: off).
func (s *Server) SetUsageLog(l *usagelog.Log) { s.usage.Store(l) }

// UsageLog is the usage log (nil when off).
func (s *Server) UsageLog() *usagelog.Log { return s.usage.Load() }

// SetIdempotency sets the store before the first Apply (default: memory).
func (s *Server) SetIdempotency(st idempotency.Store) { s.inf.Idempotency = st }

// SetAdminStore chooses where the keys and tenants issued through the
// admin API live, and loads them into the key table. Call it before the
// first Apply; without it Apply keeps them in memory (lost at exit).
func (s *Server) SetAdminStore(ctx context.Context, st admin.Store) error {
	svc := &admin.Service{St: st, Clock: s.Clock, Log: s.Log, Apply: func(is *tenant.Issued) { s.admission().SetIssued(is) }}
	s.op.Admin = svc
	return svc.Refresh(ctx, true)
}

// FollowAdmin keeps the key table in step with a store other replicas
// write (Redis) until ctx ends.
func (s *Server) FollowAdmin(ctx context.Context) {
	if s.op.Admin != nil {
		s.op.Admin.Run(ctx)
	}
}
