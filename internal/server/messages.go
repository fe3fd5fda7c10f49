package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/route"
	"switchboard/internal/sse"
	"switchboard/internal/track"
	"switchboard/internal/translate"
)

// handleMessages serves Anthropic Messages clients. The request is
// translated to the internal (OpenAI chat) form and routed to any provider
// type; Anthropic providers get the client's body untranslated.
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, r, "POST")
		return
	}
	snap := s.entry(w, r)
	if snap == nil {
		return
	}
	body, aerr := readBody(r, w, snap.Config.Limits.MaxRequestBody)
	if aerr != nil {
		writeError(w, Anthropic, aerr)
		return
	}
	model, stream, aerr := inspectBody(body)
	if aerr != nil {
		writeError(w, Anthropic, aerr)
		return
	}
	rt := snap.Routes.Lookup(model)
	if rt == nil {
		writeError(w, Anthropic, modelNotFound(model))
		return
	}
	chat, err := translate.MessagesToChat(body)
	if err != nil {
		writeError(w, Anthropic, errInvalid(err.Error()))
		return
	}
	call := &proxy.Call{Endpoint: provider.Chat, Body: chat, Native: body, Stream: stream,
		Header: forwardHeaders(r), Route: rt, Order: route.Measured{Stats: s.Stats}.Order(rt),
		Opts: options(snap.Config, rt.Model, provider.Chat)}
	res, fail := s.proxy.Do(r.Context(), call)
	if fail != nil {
		s.Prober.AfterRequest(rt)
		if !fail.Canceled {
			writeFailure(w, Anthropic, fail)
		}
		return
	}
	defer res.Close()
	setAnswerHeaders(w, res)
	if res.Native {
		// Anthropic to Anthropic: relay untouched.
		if res.Events == nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(res.Status)
			_, _ = w.Write(res.Body)
			s.finishUnary(r.Context(), rt, res, track.Messages)
			return
		}
		startStream(w)
		var st *track.Stream
		if call.Opts.Inspect {
			st = track.NewStream(track.Messages, res.Sent)
		}
		err := s.pump(sse.NewWriter(w), res, nil, st)
		s.finishStream(r.Context(), rt, res, st)
		if err != nil && !errors.Is(err, errClientGone) {
			s.streamError(w, r, res, err)
		}
		return
	}
	if res.Events == nil {
		out, _, err := translate.ChatToMessages(res.Body, model)
		if err != nil {
			writeError(w, Anthropic, &apiError{Status: http.StatusBadGateway, Message: "the provider's answer could not be translated: " + err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
		s.finishUnary(r.Context(), rt, res, track.Chat)
		return
	}
	startStream(w)
	sw := sse.NewWriter(w)
	ms := translate.NewMessagesStream(model)
	var st *track.Stream
	if call.Opts.Inspect {
		st = track.NewStream(track.Chat, res.Sent)
	}
	defer func() { s.finishStream(r.Context(), rt, res, st) }()
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
	for _, raw := range res.Held {
		ev, _ := sse.NewReader(bytes.NewReader(raw)).Next()
		if st != nil {
			st.See(&ev, res.FirstToken)
		}
		if ok, err := feed(&ev); err != nil || !ok {
			if err != nil {
				s.streamError(w, r, res, err)
			}
			return
		}
	}
	for {
		ev, err := res.Events.Next()
		if err == io.EOF {
			write(ms.Finish())
			return
		}
		if err != nil {
			s.streamError(w, r, res, err)
			return
		}
		if st != nil {
			st.See(&ev, s.Clock.Now())
		}
		ok, ferr := feed(&ev)
		if ferr != nil {
			s.streamError(w, r, res, ferr)
			return
		}
		if !ok {
			return
		}
	}
}

// streamError ends an Anthropic stream that failed after its first byte.
func (s *Server) streamError(w http.ResponseWriter, r *http.Request, res *proxy.Result, err error) {
	s.Log.WarnContext(r.Context(), "stream failed after the first byte", "provider", res.Candidate.Provider, "error", err.Error())
	_ = sse.NewWriter(w).Event("error", errorBody(Anthropic, &apiError{Status: http.StatusBadGateway,
		Message: "the upstream stream failed after it started: " + err.Error()}))
}
