package inference

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/front"
	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/route"
	"switchboard/internal/sse"
	"switchboard/internal/track"
	"switchboard/internal/translate"
)

// DroppedHeader names the hints a translated request dropped
// (translate.DroppedHeader builds its value).
const DroppedHeader = "X-Switchboard-Dropped"

// bridge is a client request in a protocol other than OpenAI chat
// (Gemini, Responses) on its way to any provider: the client's body goes
// untranslated to the providers that speak its protocol, and the
// internal form to the others, whose answer is translated back.
type bridge struct {
	proto  front.Protocol
	native provider.Endpoint // the client's protocol as a provider endpoint
	// chat is the internal form; nil when the request could not be
	// translated (refusal says why): only native providers may serve it.
	chat    []byte
	refusal error
	dropped []string
	// answer translates a unary chat answer; stream makes the translator
	// of a streamed one.
	answer func(chat []byte, model string) ([]byte, error)
	stream func(model string) translate.ClientStream
	// topK is the client's name of the field that becomes top_k.
	topK string
	// sink frames the client's stream (nil: SSE).
	sink func(w http.ResponseWriter) eventSink
}

// eventSink writes a client's stream events.
type eventSink interface {
	Event(name string, data []byte) error
	Flush()
	// Close ends the stream's framing (the Gemini array's "]").
	Close()
}

// sseSink frames events as SSE.
type sseSink struct{ *sse.Writer }

func (sseSink) Close() {}

// refuse writes a translation refusal in the bridge's protocol.
func (b *bridge) refuse(w http.ResponseWriter) {
	var fe *translate.FieldError
	if errors.As(b.refusal, &fe) {
		e := front.Invalid(fe.Error())
		e.Param, e.Code = fe.Field, fe.Code
		if e.Code == "" {
			e.Code = "unsupported_parameter"
		}
		front.WriteError(w, b.proto, e)
		return
	}
	front.WriteError(w, b.proto, front.Invalid(b.refusal.Error()))
}

// nativeOrder keeps the providers that take the client's body untranslated;
// nil when none does.
func nativeOrder(ep provider.Endpoint, order []*route.Candidate) []*route.Candidate {
	var out []*route.Candidate
	for _, c := range order {
		if proxy.TakesNative(ep, c) {
			out = append(out, c)
		}
	}
	return out
}

// serveBridged runs a bridged request here and writes its answer.
func (s *Plane) serveBridged(w http.ResponseWriter, r *http.Request, in *incoming, b *bridge) {
	call := s.call(r, in, provider.Chat, b.chat)
	call.Native, call.NativeEndpoint = in.body, b.native
	if b.native == provider.Responses {
		// tracking.responses decides the first-token gate, as before.
		d := call.Opts.Deadline
		call.Opts = options(in.snap.Config, in.rt.Model, provider.Responses)
		call.Opts.Deadline = d
	}
	if b.chat == nil {
		// Only the providers of the client's protocol may serve (lowest_cost
		// prices the client's own body).
		order := s.Selector.OrderBody(in.rt, in.body)
		if order == nil {
			order = proxy.DefaultOrder(in.rt)
		}
		if call.Order = nativeOrder(b.native, order); call.Order == nil {
			b.refuse(w)
			return
		}
	}
	res, fail := s.do(r.Context(), in, call)
	if fail != nil {
		s.failed(w, r, b.proto, in, fail)
		return
	}
	defer res.Close()
	s.advise(w, in, res)
	rt := in.rt
	inspect := call.Opts.Inspect || call.Meter
	if res.Native && b.native == provider.Responses {
		s.relay(w, r, res, provider.Responses, rt, inspect)
		return
	}
	s.setAnswerHeaders(w, res, rt)
	if res.Native {
		if res.Events == nil {
			s.answerUnary(r.Context(), w, rt, res, res.Status, res.Body)
			return
		}
		s.relayNative(w, r, res, rt, b, inspect)
		return
	}
	s.setDropped(w, r, b.dropped, b.chat, res, b.topK)
	// The answer names the provider's model, as on every endpoint.
	model := res.Candidate.Model
	if res.Events == nil {
		if m := gjson.GetBytes(res.Body, "model"); m.Type == gjson.String && m.Str != "" {
			model = m.Str
		}
		out, err := b.answer(res.Body, model)
		if err != nil {
			s.Log.WarnContext(r.Context(), "cannot translate the provider's answer", "provider", res.Candidate.Provider, "error", err.Error())
			front.WriteError(w, b.proto, &front.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "bad_response",
				Message: "the provider's answer could not be translated; request id " + front.RequestID(r.Context())})
			return
		}
		s.answerUnary(r.Context(), w, rt, res, http.StatusOK, out)
		return
	}
	s.relayTranslated(w, r, res, rt, b.sinkFor(w), b.stream, inspect)
}

// relayTranslated relays a chat stream through the client's translator
// (made by newStream for the model the stream names, else the
// provider's), measuring it, and ends it in the client's protocol.
func (s *Plane) relayTranslated(w http.ResponseWriter, r *http.Request, res *proxy.Result, rt *route.Route, sink eventSink,
	newStream func(model string) translate.ClientStream, inspect bool) {
	model := res.Candidate.Model
	for i := range res.Held {
		if m := gjson.GetBytes(res.Held[i].Data, "model"); m.Type == gjson.String && m.Str != "" {
			model = m.Str // as the provider reported it
			break
		}
	}
	cs := newStream(model)
	var st *track.Stream
	if inspect {
		st = track.NewStream(track.Chat, res.Sent)
	}
	lim := s.limitStream(res)
	err := s.feedStream(sink, res, cs, st)
	timedOut := lim.end()
	outcome := s.streamOutcome(r.Context(), err, timedOut)
	s.finishStream(r.Context(), rt, res, st, outcome)
	s.noteStream(w, res, rt, st, outcome)
	s.endStream(r, res, sink, outcome, lim, err, cs.Fail)
}

func (b *bridge) sinkFor(w http.ResponseWriter) eventSink {
	if b.sink != nil {
		return b.sink(w) // it writes its own head
	}
	front.StartStream(w)
	return sseSink{sse.NewWriter(w)}
}

// relayNative relays a stream in the client's own protocol (Gemini)
// event by event, measuring it; a failure after the start ends it with
// the protocol's error event.
func (s *Plane) relayNative(w http.ResponseWriter, r *http.Request, res *proxy.Result, rt *route.Route, b *bridge, inspect bool) {
	sink := b.sinkFor(w)
	var st *track.Stream
	if inspect {
		st = track.NewStream(proxy.ProtocolOf(b.native), res.Sent)
	}
	lim := s.limitStream(res)
	err := s.pumpNative(sink, res, st)
	timedOut := lim.end()
	if err == nil && st != nil && !res.Cut() {
		st.Clean = true // Gemini has no terminal event: a clean close ends it
	}
	outcome := s.streamOutcome(r.Context(), err, timedOut)
	s.finishStream(r.Context(), rt, res, st, outcome)
	s.noteStream(w, res, rt, st, outcome)
	s.endStream(r, res, sink, outcome, lim, err, func(status int, body []byte) []translate.Event {
		return []translate.Event{{Data: translate.ErrorToGemini(status, body)}}
	})
}

// pumpNative writes the held events, then the rest as they arrive; at
// the output bound it writes the protocol's stop for length. nil at a
// clean end.
func (s *Plane) pumpNative(sink eventSink, res *proxy.Result, st *track.Stream) error {
	// Gemini has no terminal event: a stream whose candidates never gave a
	// finishReason was cut, however cleanly it closed.
	finished := false
	see := func(ev *sse.Event, now time.Time) (stop bool, err error) {
		if len(ev.Data) == 0 {
			return false, nil
		}
		if !finished && bytes.Contains(ev.Data, finishReasonKey) {
			finished = anyString(ev.Data, "candidates.#.finishReason")
		}
		if st != nil {
			st.See(ev, now)
			if res.PastBound(ev, st) {
				if c := res.BoundChunk(); c != nil {
					_ = sink.Event("", c)
				}
				return true, nil
			}
		}
		if sink.Event(ev.Name, ev.Data) != nil {
			return true, errClientGone
		}
		return false, nil
	}
	if eof, err := s.eachEvent(res, see); !eof {
		return err
	}
	if !finished {
		return errEndedEarly
	}
	return nil
}

// eachEvent hands see the held events, then the upstream's as they
// arrive, until see stops (its error returned) or the upstream ends (eof
// true at a clean end; a read error returned).
func (s *Plane) eachEvent(res *proxy.Result, see func(ev *sse.Event, now time.Time) (stop bool, err error)) (eof bool, err error) {
	for i := range res.Held {
		if stop, err := see(&res.Held[i], res.FirstToken); stop {
			return false, err
		}
	}
	res.Held = nil
	for {
		ev, err := res.Events.Next()
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if stop, err := see(&ev, s.Clock.Now()); stop {
			return false, err
		}
	}
}

// feedStream relays a chat stream through the client's translator cs; nil
// at a clean end.
func (s *Plane) feedStream(sink eventSink, res *proxy.Result, cs translate.ClientStream, st *track.Stream) error {
	ended := false // a finish reason or [DONE] arrived
	write := func(evs []translate.Event) bool {
		for _, ev := range evs {
			if sink.Event(ev.Name, ev.Data) != nil {
				return false
			}
		}
		return true
	}
	see := func(ev *sse.Event, now time.Time) (stop bool, err error) {
		if st != nil {
			st.See(ev, now)
			if res.PastBound(ev, st) {
				// The upstream's stop for length, translated, then the end.
				evs, _ := cs.Chunk(res.BoundChunk())
				write(append(evs, cs.Finish()...))
				return true, nil
			}
		}
		if ev.Done() {
			ended = true
			return false, nil
		}
		if len(ev.Data) == 0 {
			return false, nil
		}
		if !ended && bytes.Contains(ev.Data, finishReasonChat) {
			ended = anyString(ev.Data, "choices.#.finish_reason")
		}
		evs, err := cs.Chunk(ev.Data)
		if err != nil {
			return true, err
		}
		if !write(evs) {
			return true, errClientGone
		}
		return false, nil
	}
	if eof, err := s.eachEvent(res, see); !eof {
		return err
	}
	if !ended {
		// No finish reason and no [DONE]: the provider cut the answer;
		// the translator must not invent its end.
		return errEndedEarly
	}
	if !write(cs.Finish()) {
		return errClientGone
	}
	return nil
}

// endStream ends a relayed stream for its client: at a timeout or a
// failure (its client still there) with the protocol's error event made
// by fail, then the framing's end.
func (s *Plane) endStream(r *http.Request, res *proxy.Result, sink eventSink, outcome string, lim *streamLimit, err error,
	fail func(status int, body []byte) []translate.Event) {
	var evs []translate.Event
	switch outcome {
	case streamAbandoned, streamCut:
		return // the client is gone
	case streamTimeout:
		s.Log.WarnContext(r.Context(), "stream ended by timeouts.stream", "provider", res.Candidate.Provider)
		evs = fail(http.StatusGatewayTimeout, front.ErrorBody(front.OpenAI, &front.Error{Status: http.StatusGatewayTimeout,
			Type: "server_error", Code: "stream_timeout", Message: lim.message()}))
	case streamErrored:
		s.Log.WarnContext(r.Context(), "stream failed after the first byte", "provider", res.Candidate.Provider, "error", err.Error())
		evs = fail(http.StatusBadGateway, front.ErrorBody(front.OpenAI, &front.Error{Status: http.StatusBadGateway,
			Type: "server_error", Code: "upstream_error", Message: streamFailed(r.Context())}))
	}
	for _, ev := range evs {
		if sink.Event(ev.Name, ev.Data) != nil {
			return
		}
	}
	sink.Close()
}

// setDropped names the hints a translated request dropped in the
// X-Switchboard-Dropped header (and a debug log): the translator's, and
// the client's top_k (topK) when the provider that served cannot take it.
func (s *Plane) setDropped(w http.ResponseWriter, r *http.Request, dropped []string, chat []byte, res *proxy.Result, topK string) {
	if topK != "" && proxy.DropsTopK(res.Candidate) && gjson.GetBytes(chat, "top_k").Exists() {
		dropped = append(dropped[:len(dropped):len(dropped)], topK)
	}
	if h := translate.DroppedHeader(dropped); h != "" {
		w.Header().Set(DroppedHeader, h)
		s.Log.DebugContext(r.Context(), "translation dropped hints", "dropped", h)
	}
}

var (
	finishReasonKey  = []byte(`"finishReason"`)
	finishReasonChat = []byte(`"finish_reason"`)
)

// anyString reports whether path (over a chunk's choices or candidates)
// names a non-empty string: a choice's finish reason, not null.
func anyString(data []byte, path string) bool {
	for _, r := range gjson.GetBytes(data, path).Array() {
		if r.Type == gjson.String && r.Str != "" {
			return true
		}
	}
	return false
}
