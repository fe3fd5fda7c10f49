package server

import (
	"context"

	"switchboard/internal/dispatch"
	"switchboard/internal/queue"
)

// JoinQueue switches the server to distributed execution on q; an
// ingress starts its subscription at once.
func (s *Server) JoinQueue(q *queue.Queue, role dispatch.Role) {
	s.queueing = &dispatch.Plane{Q: q, Role: role, Log: s.Log, Metrics: s.Metrics, Snap: s.Snapshot,
		Selector: s.selector, Admission: s.admission(), Jobs: s.jobRoutes()}
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
