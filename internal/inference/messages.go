package inference

import (
	"io"
	"net/http"

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
	chat, err := translate.MessagesToChat(in.body)
	if err != nil {
		front.WriteError(w, front.Anthropic, front.Invalid(err.Error()))
		return
	}
	s.idempotent(w, r, front.Anthropic, in, func(w http.ResponseWriter) {
		if s.queued(r) {
			s.dispatch(w, r, front.Anthropic, provider.Messages, in)
			return
		}
		s.messagesLocal(w, r, in, chat)
	})
}

// messagesLocal runs a Messages request here and writes its answer.
func (s *Plane) messagesLocal(w http.ResponseWriter, r *http.Request, in *incoming, chat []byte) {
	rt := in.rt
	call := s.call(r, in, provider.Chat, chat)
	call.Native = in.body
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
	sw := sse.NewWriter(w)
	for i := range res.Held {
		if m := gjson.GetBytes(res.Held[i].Data, "model"); m.Type == gjson.String && m.Str != "" {
			model = m.Str // as the provider reported it
			break
		}
	}
	ms := translate.NewMessagesStream(model)
	var st *track.Stream
	if call.Opts.Inspect || call.Meter {
		st = track.NewStream(track.Chat, res.Sent)
	}
	lim := s.limitStream(res)
	err := s.translateStream(sw, res, ms, st)
	s.endMessagesStream(w, r, rt, res, st, lim, err)
}

// endMessagesStream records how a Messages stream ended and, when it
// failed or timed out with its client still there, tells the client.
func (s *Plane) endMessagesStream(w http.ResponseWriter, r *http.Request, rt *route.Route, res *proxy.Result, st *track.Stream, lim *streamLimit, err error) {
	timedOut := lim.end()
	outcome := s.streamOutcome(r.Context(), err, timedOut)
	s.finishStream(r.Context(), rt, res, st, outcome)
	switch outcome {
	case streamTimeout:
		_ = sse.NewWriter(w).Event("error", front.ErrorBody(front.Anthropic, &front.Error{Status: http.StatusGatewayTimeout, Message: lim.message()}))
	case streamErrored:
		s.streamError(w, r, res, err)
	}
}

// translateStream relays a chat stream as Anthropic Messages events; nil
// at a clean end.
func (s *Plane) translateStream(sw *sse.Writer, res *proxy.Result, ms *translate.MessagesStream, st *track.Stream) error {
	write := func(evs []translate.Event) bool {
		for _, ev := range evs {
			if sw.Event(ev.Name, ev.Data) != nil {
				return false
			}
		}
		return true
	}
	feed := func(ev *sse.Event) (bool, error) {
		if ev.Done() || len(ev.Data) == 0 {
			return true, nil
		}
		evs, err := ms.Chunk(ev.Data)
		if err != nil {
			return false, err
		}
		return write(evs), nil
	}
	// past ends the stream at its output bound: the upstream's stop for
	// length, translated, then the message's end.
	past := func(ev *sse.Event) bool {
		if !res.PastBound(ev, st) {
			return false
		}
		evs, _ := ms.Chunk(res.BoundChunk())
		write(append(evs, ms.Finish()...))
		return true
	}
	for i := range res.Held {
		ev := &res.Held[i]
		if st != nil {
			st.See(ev, res.FirstToken)
			if past(ev) {
				return nil
			}
		}
		if ok, err := feed(ev); err != nil {
			return err
		} else if !ok {
			return errClientGone
		}
	}
	for {
		ev, err := res.Events.Next()
		if err == io.EOF {
			if !write(ms.Finish()) {
				return errClientGone
			}
			return nil
		}
		if err != nil {
			return err
		}
		if st != nil {
			st.See(&ev, s.Clock.Now())
			if past(&ev) {
				return nil
			}
		}
		ok, ferr := feed(&ev)
		if ferr != nil {
			return ferr
		}
		if !ok {
			return errClientGone
		}
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
