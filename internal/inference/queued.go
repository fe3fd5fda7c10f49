package inference

import (
	"net/http"

	"switchboard/internal/dispatch"
	"switchboard/internal/front"
	"switchboard/internal/provider"
)

// dispatch enqueues in and relays its answer. It always answers.
func (s *Plane) dispatch(w http.ResponseWriter, r *http.Request, proto front.Protocol, ep provider.Endpoint, in *incoming) {
	req := &dispatch.Request{Route: in.rt, ID: in.id, Model: in.model, Body: in.body, Stream: in.stream,
		Timeout: in.snap.Config.Timeouts.Request.D()}
	if refused := s.Dispatch.Dispatch(w, r, proto, ep, req); refused {
		// A refusal before the job is enqueued is this replica's to
		// record: no worker will ever see the request.
		if u, _ := r.Context().Value(usageRecordKey{}).(*usageRecord); u != nil {
			u.ingress = true
		}
	}
}
