package inference

import (
	"net/http"

	"switchboard/internal/front"
	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/route"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
	"switchboard/internal/translate"
)

// Responses serves POST /v1/responses. A provider that serves the
// Responses API (openai, azure, mock) gets the client's body untranslated;
// the others (anthropic, gemini, the clouds) get its chat translation, and
// the answer comes back as a Response object or the full event stream.
func (s *Plane) Responses(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
	in := s.prepare(w, r, snap, id, front.OpenAI, provider.Responses)
	if in == nil {
		return
	}
	defer in.release()
	w, r, u := s.beginUsage(w, r, in, provider.Responses)
	defer s.endUsage(r, u)
	b := &bridge{proto: front.OpenAI, native: provider.Responses}
	if !allNative(provider.Responses, in.rt) {
		if ri, err := translate.FromResponses(in.body); err != nil {
			b.refusal = err
		} else {
			b.chat, b.dropped = ri.Body, ri.Dropped
			b.answer = func(chat []byte, model string) ([]byte, error) {
				out, _, err := ri.Answer(chat, model)
				return out, err
			}
			b.stream = func(model string) translate.ClientStream { return ri.Stream(model) }
		}
	}
	s.idempotent(w, r, front.OpenAI, in, s.cached(r, front.OpenAI, cacheProtocol(provider.Responses), in, func(w http.ResponseWriter) {
		if s.queued(r) {
			s.dispatch(w, r, front.OpenAI, provider.Responses, in)
			return
		}
		if b.chat == nil && b.refusal == nil {
			// Every provider takes the body as it is: the plain relay.
			call := s.call(r, in, provider.Responses, in.body)
			res, fail := s.do(r.Context(), in, call)
			if fail != nil {
				s.failed(w, r, front.OpenAI, in, fail)
				return
			}
			defer res.Close()
			s.advise(w, in, res)
			s.relay(w, r, res, provider.Responses, in.rt, call.Opts.Inspect || call.Meter)
			return
		}
		s.serveBridged(w, r, in, b)
	}))
}

// allNative reports whether every provider of rt takes a body of protocol
// ep untranslated, so that translating it would be wasted work.
func allNative(ep provider.Endpoint, rt *route.Route) bool {
	for _, c := range rt.Candidates {
		if !proxy.TakesNative(ep, c) {
			return false
		}
	}
	return true
}
