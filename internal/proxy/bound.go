package proxy

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"

	"github.com/tidwall/gjson"

	"switchboard/internal/admit"
	"switchboard/internal/sse"
	"switchboard/internal/track"
)

// bound holds a relayed stream to the output its budget reservation
// covers. An upstream that ignores max_tokens would otherwise stream on,
// and the ledger would follow it past the budget: once the stream's
// output passes the bound it is ended for the client, in the client's
// protocol, as if the model had stopped for length, and the upstream is
// canceled; the attempt is charged what it produced (Permit.Cut).
//
// Output is counted as the stream's content events (each carries at
// least one token: a count that never runs ahead of the provider's on an
// honest stream) or its running usage when it reports more.
type bound struct {
	proto track.Protocol
	limit int64
	// What the closing events repeat: a chat or completions stream's id,
	// model and created; a Responses stream's response id and model.
	id, model string
	created   int64
	// open are the choices (chat, completions) or content blocks
	// (Messages) not yet finished.
	open []int64
	cut  bool
}

func newBound(proto track.Protocol, limit int64) *bound {
	if limit <= 0 {
		return nil
	}
	return &bound{proto: proto, limit: limit}
}

// PastBound observes ev, which st has just seen, and reports whether the
// stream has now passed its output bound: ev must then not reach the
// client, and EndAtBound (or BoundChunk) ends the stream. Always false
// for a stream without a bound.
func (r *Result) PastBound(ev *sse.Event, st *track.Stream) bool {
	b := r.bound
	if b == nil || st == nil || b.cut {
		return false
	}
	b.see(ev)
	n := int64(st.Content + st.Thinking)
	if st.Usage.HasOutput {
		n = max(n, st.Usage.Output)
	}
	if n <= b.limit {
		return false
	}
	b.cut = true
	r.produced = n
	return true
}

// EndAtBound ends a stream that PastBound stopped: the closing events of
// its protocol with the stop reason for length, then the upstream is
// canceled.
func (r *Result) EndAtBound(sw *sse.Writer) {
	for _, ev := range r.bound.closing() {
		if ev.name == "" {
			_ = sw.Data(ev.data)
		} else {
			_ = sw.Event(ev.name, ev.data)
		}
	}
	if r.bound.proto == track.Chat || r.bound.proto == track.Completions {
		_ = sw.Done()
	}
	r.cancelUpstream()
}

// BoundChunk is EndAtBound for a chat stream relayed in another protocol:
// the chat chunk that stops every choice for length, for the translator;
// the upstream is canceled.
func (r *Result) BoundChunk() []byte {
	r.cancelUpstream()
	evs := r.bound.closing()
	if len(evs) == 0 {
		return nil
	}
	return evs[0].data
}

// Cut reports whether the stream was ended at its output bound.
func (r *Result) Cut() bool { return r.bound != nil && r.bound.cut }

// cancelUpstream stops the upstream stream now (the relay's Close
// releases the rest later).
func (r *Result) cancelUpstream() {
	if r.body != nil {
		r.body.Close()
	}
	if r.cancel != nil {
		r.cancel()
	}
}

// see notes what the closing events need.
func (b *bound) see(ev *sse.Event) {
	if len(ev.Data) == 0 || ev.Done() {
		return
	}
	d := gjson.ParseBytes(ev.Data)
	switch b.proto {
	case track.Chat, track.Completions:
		if v := d.Get("id"); v.Type == gjson.String {
			b.id = v.Str
		}
		if v := d.Get("model"); v.Type == gjson.String {
			b.model = v.Str
		}
		if v := d.Get("created"); v.Type == gjson.Number {
			b.created = v.Int()
		}
		d.Get("choices").ForEach(func(_, c gjson.Result) bool {
			f := c.Get("finish_reason")
			b.mark(c.Get("index").Int(), f.Type == gjson.Null || f.Str == "")
			return true
		})
	case track.Responses:
		if r := d.Get("response"); r.IsObject() {
			if v := r.Get("id"); v.Type == gjson.String {
				b.id = v.Str
			}
			if v := r.Get("model"); v.Type == gjson.String {
				b.model = v.Str
			}
		}
	case track.Gemini:
		if v := d.Get("responseId"); v.Type == gjson.String {
			b.id = v.Str
		}
		if v := d.Get("modelVersion"); v.Type == gjson.String {
			b.model = v.Str
		}
		d.Get("candidates").ForEach(func(_, c gjson.Result) bool {
			b.mark(c.Get("index").Int(), c.Get("finishReason").Str == "")
			return true
		})
	case track.Messages:
		switch d.Get("type").Str {
		case "content_block_start":
			b.mark(d.Get("index").Int(), true)
		case "content_block_stop":
			b.mark(d.Get("index").Int(), false)
		}
	}
}

// maxOpen bounds the choices or blocks remembered as open.
const maxOpen = 256

func (b *bound) mark(i int64, open bool) {
	k := slices.Index(b.open, i)
	switch {
	case open && k < 0 && len(b.open) < maxOpen:
		b.open = append(b.open, i)
	case !open && k >= 0:
		b.open = slices.Delete(b.open, k, k+1)
	}
}

type boundEvent struct {
	name string
	data []byte
}

// closing are the events that end the stream for length in its protocol.
func (b *bound) closing() []boundEvent {
	enc := func(v any) []byte {
		out, _ := json.Marshal(v)
		return out
	}
	open := b.open
	switch b.proto {
	case track.Chat, track.Completions:
		if len(open) == 0 {
			open = []int64{0}
		}
		object := "chat.completion.chunk"
		var choices []map[string]any
		for _, i := range open {
			c := map[string]any{"index": i, "finish_reason": "length"}
			if b.proto == track.Completions {
				c["text"], object = "", "text_completion"
			} else {
				c["delta"] = map[string]any{}
			}
			choices = append(choices, c)
		}
		return []boundEvent{{data: enc(map[string]any{"id": b.id, "object": object, "created": b.created, "model": b.model,
			"choices": choices})}}
	case track.Responses:
		return []boundEvent{{name: "response.incomplete", data: enc(map[string]any{"type": "response.incomplete",
			"response": map[string]any{"id": b.id, "object": "response", "model": b.model, "status": "incomplete",
				"incomplete_details": map[string]any{"reason": "max_output_tokens"}, "output": []any{}}})}}
	case track.Messages:
		var out []boundEvent
		for _, i := range open {
			out = append(out, boundEvent{"content_block_stop", enc(map[string]any{"type": "content_block_stop", "index": i})})
		}
		out = append(out, boundEvent{"message_delta", enc(map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": "max_tokens", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": b.limit}})})
		return append(out, boundEvent{"message_stop", enc(map[string]any{"type": "message_stop"})})
	case track.Gemini:
		if len(open) == 0 {
			open = []int64{0}
		}
		var cands []map[string]any
		for _, i := range open {
			cands = append(cands, map[string]any{"index": i, "finishReason": "MAX_TOKENS",
				"content": map[string]any{"role": "model", "parts": []any{}}})
		}
		return []boundEvent{{data: enc(map[string]any{"candidates": cands, "responseId": b.id, "modelVersion": b.model})}}
	}
	return nil
}

// SettleStream ends a relayed stream's admission. A stream cut at its
// bound is charged what it produced (its input as reported, else the
// reservation's); a stream that ended cleanly with its usage final
// (after its content, or in its terminal event) and complete (input and
// output counters, or a provider bill) settles on it; anything else
// keeps the hold, raised by whatever usage was seen.
func (p *Proxy) SettleStream(ctx context.Context, res *Result, st *track.Stream) {
	pm := res.Permit
	if pm == nil {
		return
	}
	if res.Cut() {
		u := admit.Usage{Input: pm.InputBound(), Output: res.produced}
		if st != nil {
			if st.Usage.HasInput {
				u = SpendUsage(st.Usage)
				u.Output = max(u.Output, res.produced)
			}
		}
		pm.Cut(u)
		p.logBound(ctx, res, "stream ended at its output bound", u.Output, pm.OutputBound())
		return
	}
	final := st != nil && st.Clean && st.Final
	if final && (st.Usage.Complete(false) || res.Bill != nil) {
		u := SpendUsage(st.Usage)
		u.CostNanoUSD = res.Bill
		if pm.OverBound(u) {
			p.logBound(ctx, res, "stream output passed its bound: charged in full", u.Output, pm.OutputBound())
		}
		pm.Settle(u)
		return
	}
	// Cut, unfinished, or its usage partial: what was seen may raise the
	// hold (never lower it), and the hold stays.
	if st != nil && st.Usage.Known || res.Bill != nil {
		u := admit.Usage{CostNanoUSD: res.Bill}
		if st != nil && st.Usage.Known {
			u = SpendUsage(st.Usage)
			u.CostNanoUSD = res.Bill
		}
		pm.Partial(u)
	}
	pm.Keep()
}

// logBound logs an answer whose output passed its reservation's bound.
func (p *Proxy) logBound(ctx context.Context, res *Result, msg string, output, bound int64) {
	if p.Log == nil {
		return
	}
	p.Log.LogAttrs(ctx, slog.LevelWarn, msg, slog.String("provider", res.Candidate.Provider),
		slog.String("model", res.Candidate.Model), slog.Int64("output_tokens", output), slog.Int64("bound", bound))
}

// producedOf is what a stream that committed and then lost a race is
// known to have produced: its held events' output (nothing reached the
// client).
func producedOf(res *Result) admit.Usage {
	u := admit.Usage{Input: res.Permit.InputBound()}
	st := track.NewStream(res.proto, res.Sent)
	for i := range res.Held {
		st.See(&res.Held[i], res.Sent)
	}
	if st.Usage.HasInput {
		u.Input = st.Usage.Input
	}
	u.Output = int64(st.Content + st.Thinking)
	if st.Usage.HasOutput {
		u.Output = max(u.Output, st.Usage.Output)
	}
	return u
}
