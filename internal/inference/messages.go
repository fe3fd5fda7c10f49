package inference

import (
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"

	"switchboard/internal/front"
	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/route"
	"switchboard/internal/snapshot"
	"switchboard/internal/sse"
	"switchboard/internal/tenant"
	"switchboard/internal/track"
	"switchboard/internal/translate"
)

// Messages serves Anthropic Messages clients. The request is
// translated to the internal (OpenAI chat) form and routed to any provider
// type; Anthropic providers get the client's body untranslated.
func (s *Plane) Messages(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
	in := s.prepare(w, r, snap, id, front.Anthropic, provider.Messages)
	if in == nil {
		return
	}
	defer in.release()
	w, r, u := s.beginUsage(w, r, in, provider.Messages)
	defer s.endUsage(r, u)
	// Native pass-through needs no translation: an anthropic provider (or
	// a cloud's Claude) gets the client's body with only model rewritten.
	// The translation is made only when some provider needs it, and a
	// refusal stands only when no provider takes the body as it is.
	var tr *translate.Inbound
	if !allNative(provider.Messages, in.rt) {
		var err error
		if tr, err = translate.FromMessages(in.body); err != nil && nativeOrder(provider.Messages, in.rt.Candidates) == nil {
			(&bridge{proto: front.Anthropic, refusal: err}).refuse(w)
			return
		}
	}
	s.idempotent(w, r, front.Anthropic, in, s.cached(r, front.Anthropic, cacheProtocol(provider.Messages), in, func(w http.ResponseWriter) {
		if s.queued(r) {
			s.dispatch(w, r, front.Anthropic, provider.Messages, in)
			return
		}
		s.messagesLocal(w, r, in, tr)
	}))
}

// messagesLocal runs a Messages request here and writes its answer; tr is
// its translation (nil: only native providers may serve it).
func (s *Plane) messagesLocal(w http.ResponseWriter, r *http.Request, in *incoming, tr *translate.Inbound) {
	rt := in.rt
	var chat []byte
	if tr != nil {
		chat = tr.Body
	}
	call := s.call(r, in, provider.Chat, chat)
	call.Native = in.body
	if chat == nil {
		order := s.Selector.OrderBody(rt, in.body)
		if order == nil {
			order = proxy.DefaultOrder(rt)
		}
		call.Order = nativeOrder(provider.Messages, order)
	}
	res, fail := s.do(r.Context(), in, call)
	if fail != nil {
		s.failed(w, r, front.Anthropic, in, fail)
		return
	}
	defer res.Close()
	s.advise(w, in, res)
	s.setAnswerHeaders(w, res, rt)
	// The answer names the provider's model, as on every endpoint (and as
	// an Anthropic provider's own answer does); the client's is a header.
	model := res.Candidate.Model
	if res.Native {
		// Anthropic to Anthropic: relay untouched.
		if res.Events == nil {
			s.answerUnary(r.Context(), w, rt, res, res.Status, res.Body)
			return
		}
		front.StartStream(w)
		var st *track.Stream
		if call.Opts.Inspect || call.Meter {
			st = track.NewStream(track.Messages, res.Sent)
		}
		lim := s.limitStream(res)
		err := s.pump(sse.NewWriter(w), res, nil, st)
		s.endMessagesStream(w, r, rt, res, st, lim, err)
		return
	}
	if tr == nil {
		// Only native providers were tried; a non-native answer cannot be.
		front.WriteError(w, front.Anthropic, &front.Error{Status: http.StatusBadGateway, Message: "no provider took the request untranslated"})
		return
	}
	s.setDropped(w, r, tr.Dropped, tr.Body, res, "top_k")
	if res.Events == nil {
		if m := gjson.GetBytes(res.Body, "model"); m.Type == gjson.String && m.Str != "" {
			model = m.Str // as the provider reported it
		}
		out, _, err := translate.ChatToMessages(res.Body, model)
		if err != nil {
			s.Log.WarnContext(r.Context(), "cannot translate the provider's answer", "provider", res.Candidate.Provider, "error", err.Error())
			front.WriteError(w, front.Anthropic, &front.Error{Status: http.StatusBadGateway, Message: "the provider's answer could not be translated; request id " + front.RequestID(r.Context())})
			return
		}
		s.answerUnary(r.Context(), w, rt, res, http.StatusOK, out)
		return
	}
	front.StartStream(w)
	s.relayTranslated(w, r, res, rt, sseSink{sse.NewWriter(w)}, func(model string) translate.ClientStream {
		return translate.NewMessagesStream(model)
	}, call.Opts.Inspect || call.Meter)
}

// endMessagesStream records how a Messages stream ended and, when it
// failed or timed out with its client still there, tells the client.
func (s *Plane) endMessagesStream(w http.ResponseWriter, r *http.Request, rt *route.Route, res *proxy.Result, st *track.Stream, lim *streamLimit, err error) {
	timedOut := lim.end()
	outcome := s.streamOutcome(r.Context(), err, timedOut)
	s.finishStream(r.Context(), rt, res, st, outcome)
	s.noteStream(w, res, rt, st, outcome)
	switch outcome {
	case streamTimeout:
		_ = sse.NewWriter(w).Event("error", front.ErrorBody(front.Anthropic, &front.Error{Status: http.StatusGatewayTimeout, Message: lim.message()}))
	case streamErrored:
		s.streamError(w, r, res, err)
	}
}

// streamError ends an Anthropic stream that failed after its first byte.
func (s *Plane) streamError(w http.ResponseWriter, r *http.Request, res *proxy.Result, err error) {
	if r.Context().Err() != nil {
		return // the client left; nothing to tell it
	}
	s.Log.WarnContext(r.Context(), "stream failed after the first byte", "provider", res.Candidate.Provider, "error", err.Error())
	front.EndFailedStream(sse.NewWriter(w), front.Anthropic, provider.Messages, streamFailed(r.Context()))
}

// MessagesCountTokens serves POST /v1/messages/count_tokens: an anthropic
// provider of the model counts (the body passed through with only model
// rewritten); otherwise the answer is the gateway's estimate.
func (s *Plane) MessagesCountTokens(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
	in := s.prepare(w, r, snap, id, front.Anthropic, provider.Messages)
	if in == nil {
		return
	}
	defer in.release()
	w, r, u := s.beginUsage(w, r, in, provider.MessagesCountTokens)
	defer s.endUsage(r, u)
	s.countTokens(w, r, in, front.Anthropic, provider.MessagesCountTokens, func(n int64) []byte {
		return []byte(`{"input_tokens":` + strconv.FormatInt(n, 10) + `}`)
	})
}
