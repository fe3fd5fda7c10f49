package inference

import (
	"net/http"
	"slices"
	"strings"

	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/route"
)

// untried lists the providers of the models a failed request was for
// (its own and any fallback it reached) that serve its endpoint and were
// never sent to, each with why: its circuit open, a quota pause, or not
// reached (the loop ended first). When a model has several providers and
// only one was tried, that provider's raw error is not the answer: the
// gateway's "All providers failed" names the ones it skipped.
func (s *Plane) untried(r *http.Request, in *incoming, f *proxy.Failure) []proxy.Attempt {
	ep := provider.Endpoint(strings.TrimPrefix(r.URL.Path, "/v1/"))
	if ep == provider.Messages {
		ep = provider.Chat // translated for every provider
	}
	routes := []*route.Route{in.rt}
	for _, a := range f.Attempts {
		if rt := in.snap.Routes.Lookup(a.Model); rt != nil && !slices.Contains(routes, rt) {
			routes = append(routes, rt)
		}
	}
	var out []proxy.Attempt
	for _, rt := range routes {
		for _, c := range rt.Candidates {
			tried := slices.ContainsFunc(f.Attempts, func(a proxy.Attempt) bool { return a.Provider == c.Provider })
			if tried || !provider.Serves(c.Send, ep) || slices.ContainsFunc(out, func(a proxy.Attempt) bool { return a.Provider == c.Provider }) {
				continue
			}
			why := "not_reached"
			if s.Proxy != nil && s.Proxy.Health != nil {
				switch st := s.Proxy.Health.Status(c.Provider); {
				case st.CircuitOpen:
					why = "circuit_open"
				case !st.PausedUntil.IsZero():
					why = "quota_paused"
					if st.PauseReason != "" {
						why += ": " + st.PauseReason
					}
				}
			}
			out = append(out, proxy.Attempt{Provider: c.Provider, Model: rt.Model.Name, Reason: "skipped (" + why + ")"})
		}
	}
	return out
}
