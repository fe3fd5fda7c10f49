package inference

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/tidwall/gjson"

	"switchboard/internal/admit"
	"switchboard/internal/front"
	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/route"
	"switchboard/internal/spend"
	"switchboard/internal/sse"
	"switchboard/internal/track"
)

// setAnswerHeaders relays the provider's headers and names who served.
// The answer's "model" is, on every endpoint, the provider's own model
// name (what actually answered, as the provider reported it); the name
// the client asked for is X-Switchboard-Model, and the provider's config
// name X-Switchboard-Provider.
func (s *Plane) setAnswerHeaders(w http.ResponseWriter, res *proxy.Result, rt *route.Route) {
	h := w.Header()
	front.CopyUpstreamHeaders(h, res.Header)
	s.secrets().Header(h)
	if v := res.Candidate.ProviderValue; v != nil {
		h["X-Switchboard-Provider"] = v
	} else {
		h.Set("X-Switchboard-Provider", res.Candidate.Provider)
	}
	switch {
	case rt != nil && rt.ModelValue != nil:
		h["X-Switchboard-Model"] = rt.ModelValue // shared: net/http never writes into a value slice
	case rt != nil:
		h["X-Switchboard-Model"] = []string{rt.Model.Name}
	}
	setFallbackHeader(h, res, rt)
}

// relay writes a committed result in the OpenAI protocol, measuring it on
// the way.
func (s *Plane) relay(w http.ResponseWriter, r *http.Request, res *proxy.Result, ep provider.Endpoint, rt *route.Route, inspect bool) {
	s.setAnswerHeaders(w, res, rt)
	proto := proxy.ProtocolOf(ep)
	if res.Events == nil {
		s.answerUnary(r.Context(), w, rt, res, res.Status, s.withCost(res.Body, res, res.Usage))
		return
	}
	front.StartStream(w)
	sw := sse.NewWriter(w)
	var tail streamTail
	if ep == provider.Responses {
		tail = &responsesTail{}
	}
	var st *track.Stream
	if inspect {
		st = track.NewStream(proto, res.Sent)
	}
	lim := s.limitStream(res)
	err := s.pump(sw, res, tail, st)
	timedOut := lim.end()
	outcome := s.streamOutcome(r.Context(), err, timedOut)
	s.finishStream(r.Context(), rt, res, st, outcome)
	s.noteStream(w, res, rt, st, outcome)
	if outcome == streamAbandoned || outcome == streamCut {
		return // the client is gone; its cancellation ended the upstream read
	}
	if timedOut {
		s.Log.WarnContext(r.Context(), "stream ended by timeouts.stream", "provider", res.Candidate.Provider)
		if ep != provider.Responses { // its tail has already failed the response
			_ = sw.Data(front.ErrorBody(front.OpenAI, &front.Error{Type: "server_error", Code: "stream_timeout", Message: lim.message()}))
			_ = sw.Done()
		}
		return
	}
	if err == nil {
		// A translated stream that reported an error event, or a server
		// that omits it, ends without [DONE]: send it so clients stop.
		if st != nil && !st.Clean && !res.Cut() && (proto == track.Chat || proto == track.Completions) {
			_ = sw.Done()
		}
		return
	}
	s.Log.WarnContext(r.Context(), "stream failed after the first byte", "provider", res.Candidate.Provider, "error", err.Error())
	// No fallback once bytes reached the client: end the stream with an
	// error event in the client's protocol, then [DONE]. The cause stays
	// in the log: it names addresses and internals.
	front.EndFailedStream(sw, front.OpenAI, ep, streamFailed(r.Context()))
}

// errEndedEarly is an upstream stream that closed before its end (no
// terminal event, no finish reason): the answer was cut, so the client is
// told so in its protocol and nothing takes it for a complete answer
// (the cache, a settlement's final usage).
var errEndedEarly = errors.New("the provider closed the stream before its end")

// streamTail watches relayed events and may add events at the end.
type streamTail interface {
	// See notes ev and reports whether to relay it now.
	See(ev *sse.Event) bool
	// Finish writes what the stream lacked at its end.
	Finish(sw *sse.Writer)
}

// pump writes the held events, then relays the rest event by event,
// feeding st when tracking is on. Writes are flushed whenever the reader is
// about to wait for the upstream, so no event waits in a buffer, and events
// that arrived together leave in one write (as ReverseProxy relays what one
// read returned). It returns nil at a clean end, errClientGone when the
// client left, or the upstream's error.
func (s *Plane) pump(sw *sse.Writer, res *proxy.Result, tail streamTail, st *track.Stream) error {
	// Held events go out together: one flush for the status line, headers
	// and everything up to the first token.
	for i := range res.Held {
		ev := &res.Held[i]
		if tail != nil && !tail.See(ev) {
			continue
		}
		raw := ev.Raw
		if st != nil {
			st.See(ev, res.FirstToken)
			if res.PastBound(ev, st) {
				res.EndAtBound(sw)
				return nil
			}
			var skip bool
			if raw, skip = s.usageEvent(ev, res, st); skip {
				continue
			}
		}
		if err := sw.Write(raw); err != nil {
			return errClientGone
		}
	}
	sw.Flush()
	res.Held = nil // relayed; the stream may run for minutes
	res.Events.BeforeRead(sw.Flush)
	defer res.Events.BeforeRead(nil)
	var ev sse.Event // one per stream: its address is taken below
	for {
		var err error
		ev, err = res.Events.Next()
		if err != nil {
			sw.Flush()
			if tail != nil {
				tail.Finish(sw)
				return nil
			}
			if err == io.EOF && st != nil && !st.Ended() {
				return errEndedEarly
			}
			if err == io.EOF {
				return nil
			}
			return err
		}
		if tail != nil && !tail.See(&ev) {
			continue
		}
		raw := ev.Raw
		if st != nil {
			st.See(&ev, s.Clock.Now())
			if res.PastBound(&ev, st) {
				sw.Flush()
				res.EndAtBound(sw)
				return nil
			}
			var skip bool
			if raw, skip = s.usageEvent(&ev, res, st); skip {
				continue
			}
		}
		if err := sw.Write(raw); err != nil {
			return errClientGone
		}
	}
}

var usageKey = []byte(`"usage"`)

// usageEvent handles an event that may carry usage: a provider bill is
// noted (a terminal one, after the content ended, settles the attempt;
// one before is a floor: it raises the hold, never lowers it, and a later
// estimate cannot settle below it), and cost_usd (or, for a floor,
// provider_cost_floor_usd) is added. skip reports a usage-only chunk the
// gateway asked for and the client did not.
func (s *Plane) usageEvent(ev *sse.Event, res *proxy.Result, st *track.Stream) (raw []byte, skip bool) {
	if len(ev.Data) == 0 || !bytes.Contains(ev.Data, usageKey) {
		return ev.Raw, false
	}
	floor := false
	if b := spend.ReportedBill(ev.Data); b != nil {
		if partialChunk(ev.Data) || !st.Final {
			floor = true
			res.Permit.Partial(admit.Usage{CostNanoUSD: b})
		} else {
			res.Bill = b // a provider's own bill outranks the catalog
		}
	}
	if res.StripUsage && isUsageOnly(ev.Data) {
		return nil, true
	}
	if floor {
		return floorEvent(ev), false
	}
	return s.costEvent(ev, res, st), false
}

// partialChunk reports a chat or completions chunk with a choice still
// generating (no finish_reason yet): usage it carries is not final.
func partialChunk(data []byte) bool {
	partial := false
	gjson.GetBytes(data, "choices").ForEach(func(_, c gjson.Result) bool {
		if f := c.Get("finish_reason"); !f.Exists() || f.Type == gjson.Null {
			partial = true
		}
		return !partial
	})
	return partial
}

// floorEvent shows a nonterminal provider bill as
// usage.provider_cost_floor_usd (what was billed so far), never as
// cost_usd, which would read as the final cost.
func floorEvent(ev *sse.Event) []byte {
	usage := gjson.GetBytes(ev.Data, "usage")
	cost := usage.Get("cost")
	if !usage.IsObject() || cost.Type != gjson.Number {
		return ev.Raw
	}
	return sse.Frame(ev.Name, setUsageField(ev.Data, usage, "provider_cost_floor_usd", []byte(cost.Raw)))
}

// isUsageOnly reports a chat chunk that only carries usage (choices: []).
func isUsageOnly(data []byte) bool {
	r := gjson.ParseBytes(data)
	return r.Get("usage").IsObject() && len(r.Get("choices").Array()) == 0
}

// costEvent rewrites an event that carries usage so its usage has cost_usd,
// keeping its event name.
func (s *Plane) costEvent(ev *sse.Event, res *proxy.Result, st *track.Stream) []byte {
	if !st.Usage.Known || !gjson.GetBytes(ev.Data, "usage").IsObject() {
		return ev.Raw
	}
	out := s.withCost(ev.Data, res, st.Usage)
	if len(out) == len(ev.Data) {
		return ev.Raw
	}
	return sse.Frame(ev.Name, out)
}

// responsesTail injects response.failed when a Responses stream ends
// without a terminal event, so clients fail fast instead of hanging. A
// stream that ends in response.not_found (what LLM Proxy sends in place of
// response.failed, so a chained gateway forwards it) is such a stream too;
// and a [DONE] before any terminal event is held back so that the
// injected response.failed comes before it, where clients still read.
type responsesTail struct{ terminal bool }

func (t *responsesTail) See(ev *sse.Event) bool {
	if ev.Done() {
		return t.terminal
	}
	typ := ev.Name
	if typ == "" && len(ev.Data) > 0 && ev.Data[0] == '{' {
		typ = gjson.GetBytes(ev.Data, "type").String()
	}
	switch typ {
	case "response.completed", "response.failed", "response.incomplete", "error":
		t.terminal = true
	}
	return true
}

func (t *responsesTail) Finish(sw *sse.Writer) {
	if t.terminal {
		return
	}
	_ = sw.Event("response.failed", front.ResponsesFailed("upstream_stopped", "the upstream ended the stream without completing the response"))
	_ = sw.Done()
}

// streamFailed is the client's message for a stream that failed after it
// started: generic, with the request id that finds the cause in the log.
func streamFailed(ctx context.Context) string {
	return "the upstream stream failed after it started; request id " + front.RequestID(ctx)
}
