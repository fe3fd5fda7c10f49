package server

import (
	"context"
	"net/http"

	"switchboard/internal/dispatch"
	"switchboard/internal/front"
	"switchboard/internal/provider"
	"switchboard/internal/queue"
)

// JoinQueue switches the server to distributed execution on q; an
// ingress starts its subscription at once.
func (s *Server) JoinQueue(q *queue.Queue, role dispatch.Role) {
	s.queueing = &dispatch.Plane{Q: q, Role: role, Log: s.Log, Metrics: s.Metrics, Snap: s.Snapshot,
		Selector: s.selector, Admission: s.admission(), Jobs: s.jobRoutes()}
	s.op.QueueDetail = s.queueing.Detail
	s.queueing.Join()
}

// StartQueue joins distributed execution on q with role: the reaper runs on
// every replica, the worker loop on workers. The returned wait blocks
// until the worker has drained after ctx ended.
func (s *Server) StartQueue(ctx context.Context, q *queue.Queue, role dispatch.Role) (wait func()) {
	s.JoinQueue(q, role)
	return s.queueing.Start(ctx)
}

// queued reports whether this request is to be enqueued rather than run
// here: queue mode, and not already a job a worker is running.
func (s *Server) queued(r *http.Request) bool {
	return s.queueing != nil && dispatch.JobOf(r.Context()) == nil
}

// dispatch enqueues in and relays its answer. It always answers.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, proto front.Protocol, ep provider.Endpoint, in *incoming) {
	req := &dispatch.Request{Route: in.rt, ID: in.id, Model: in.model, Body: in.body, Stream: in.stream,
		Timeout: in.snap.Config.Timeouts.Request.D()}
	if refused := s.queueing.Dispatch(w, r, proto, ep, req); refused {
		// A refusal before the job is enqueued is this replica's to
		// record: no worker will ever see the request.
		if u, _ := r.Context().Value(usageRecordKey{}).(*usageRecord); u != nil {
			u.ingress = true
		}
	}
}
