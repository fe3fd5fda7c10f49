package operator

import (
	"net/http"
	"time"

	"switchboard/internal/admit"
	"switchboard/internal/front"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
)

// Usage serves GET /v1/usage for the authenticated caller.
func (s *Plane) Usage(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
	v, err := s.Admission.Usage(r.Context(), id, admit.UsageOptions{Advisory: snap.Advisory, Providers: tenant.Operator(id),
		ByModel: !tenant.Operator(id), Key: true})
	if err != nil {
		// The store's error names its address: the log has it.
		s.Log.WarnContext(r.Context(), "usage unavailable", "error", err.Error())
		front.WriteError(w, front.OpenAI, &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "usage_unavailable",
			Message: "usage is unavailable right now; request id " + front.RequestID(r.Context()), RetryAfter: time.Second})
		return
	}
	front.WriteJSON(w, http.StatusOK, v)
}
