package inference

import (
	"net/http"
	"time"

	"switchboard/internal/dispatch"
	"switchboard/internal/front"
	"switchboard/internal/provider"
)

// Route is one model endpoint: a POST route whose requests may be
// enqueued.
type Route struct {
	Path  string
	Serve front.Handler
}

// Routes are the model endpoints. The server mounts them behind its auth;
// a worker serves a queued job through them (Jobs).
func (s *Plane) Routes() []Route {
	return []Route{
		{"/v1/chat/completions", s.Endpoint(provider.Chat)},
		{"/v1/completions", s.Endpoint(provider.Completions)},
		{"/v1/responses", s.Responses},
		{"/v1/embeddings", s.Endpoint(provider.Embeddings)},
		{"/v1/messages", s.Messages},
		{"/v1/messages/count_tokens", s.MessagesCountTokens},
	}
}

// Jobs serves a queued job's request on a worker (dispatch.Plane.Jobs):
// the model endpoints, for the identity the ingress authenticated, under
// the snapshot in force, with no access log or request metrics (the
// ingress counted the request).
func (s *Plane) Jobs() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.Routes() {
		serve := rt.Serve
		mux.HandleFunc(rt.Path, func(w http.ResponseWriter, r *http.Request) {
			snap, job := s.Snap(), dispatch.JobOf(r.Context())
			if snap == nil || job == nil {
				front.WriteError(w, front.ProtocolOf(r), &front.Error{Status: http.StatusServiceUnavailable, Type: "server_error",
					Code: "unavailable", Message: "the gateway is starting or shutting down", RetryAfter: time.Second})
				return
			}
			serve(w, r, snap, job.ID)
		})
	}
	mux.HandleFunc("/", front.NotFound)
	return mux
}
