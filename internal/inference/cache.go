package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/admit"
	"switchboard/internal/cache"
	"switchboard/internal/front"
	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/route"
	"switchboard/internal/spend"
	"switchboard/internal/track"
)

// The response cache (internal/cache) as the handlers use it: a request
// of a cached model is looked up before the attempt loop; a hit is
// replayed (no provider, no spend; counted in the caller's rpm, a usage
// row with cache_hit and saved_usd); a miss is served through the
// cache's recorder, and the relay notes how the answer ended and what it
// cost, so that only a complete answer is stored, with its price.

// cacheProtocol names an OpenAI endpoint's protocol for the cache.
func cacheProtocol(ep provider.Endpoint) string {
	switch ep {
	case provider.Completions:
		return cache.ProtoCompletions
	case provider.Responses:
		return cache.ProtoResponses
	case provider.Embeddings:
		return cache.ProtoEmbeddings
	case provider.Messages:
		return cache.ProtoMessages
	case provider.GenerateContent:
		return cache.ProtoGemini
	}
	return cache.ProtoChat
}

// cached wraps serve with the response cache when in's model caches. A
// request handed to the queue is looked up by the worker that runs it
// (which knows how it ended and what it cost), not here.
func (s *Plane) cached(r *http.Request, proto front.Protocol, cproto string, in *incoming, serve func(http.ResponseWriter)) func(http.ResponseWriter) {
	if s.Cache == nil || s.queued(r) {
		return serve
	}
	c, p := s.Cache(), in.snap.Cache[in.rt.Model.Name]
	if c == nil || p == nil {
		return serve
	}
	return func(w http.ResponseWriter) {
		req := &cache.Request{Protocol: cproto, Model: in.rt.Model.Name, Tenant: in.id.Label(), Stream: in.stream,
			Body: in.body, Header: r.Header}
		if cproto == cache.ProtoGemini && in.stream {
			req.Framing = r.URL.Query().Get("alt") // "sse", or "" for the JSON array
		}
		l := c.Lookup(r.Context(), p, req, s.embedder(r, in))
		if l.Result == cache.Hit {
			s.replayHit(w, r, proto, in, c, l)
			return
		}
		w.Header().Set("X-Switchboard-Cache", l.Result)
		rec := l.Recorder(w)
		if rec == nil {
			serve(w)
			return
		}
		serve(rec)
		l.Finish(r.Context(), rec)
	}
}

// replayHit answers from the cache: the hit counts in the caller's rpm (a
// 429 like any request's when over it), then the stored answer is written
// as the client first received it, a stream chunk by chunk.
func (s *Plane) replayHit(w http.ResponseWriter, r *http.Request, proto front.Protocol, in *incoming, c *cache.Cache, l *cache.Lookup) {
	adv, ref := s.Admission.CountHit(r.Context(), in.id)
	if ref != nil {
		s.writeRefusal(w, proto, in.id, ref)
		return
	}
	if in.snap.Advisory && in.id != nil && adv.OK {
		adv.SetHeaders(w.Header(), in.snap.AdvisoryNames)
	}
	e := l.Entry
	h := w.Header()
	for k, v := range e.Header {
		h[k] = v
	}
	h.Set("X-Switchboard-Cache", cache.Hit)
	h.Set("Age", strconv.FormatInt(int64(l.Age/time.Second), 10))
	if u, _ := r.Context().Value(usageRecordKey{}).(*usageRecord); u != nil {
		u.row.CacheHit, u.row.Provider, u.row.ProviderModel, u.row.ServedModel = true, e.Provider, e.ProviderModel, e.ServedModel
		if e.Priced {
			u.row.SavedNano = e.CostNano
		}
	}
	c.Served(in.rt.Model.Name, e)
	if !e.Stream {
		front.WriteUnary(w, e.Status, e.Chunks[0])
	} else {
		// The stored Content-Type stays: an SSE stream, or Gemini's JSON
		// array framing.
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", "text/event-stream")
		}
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(e.Status)
		f, _ := w.(http.Flusher)
		for _, ch := range e.Chunks {
			if _, err := w.Write(ch); err != nil {
				break // the client left
			}
			if f != nil {
				f.Flush()
			}
		}
	}
	if s.Log.Enabled(r.Context(), slog.LevelInfo) {
		s.Log.LogAttrs(r.Context(), slog.LevelInfo, fmt.Sprintf("[%s/cache] Hit", in.rt.Model.Name),
			slog.String("model", in.rt.Model.Name), slog.Duration("age", l.Age), slog.Float64("similarity", l.Similarity),
			slog.Int64("saved_nano_usd", e.CostNano))
	}
}

// cacheRecorder finds the cache's recorder under w (nil when the answer
// is not being recorded).
func cacheRecorder(w http.ResponseWriter) *cache.Recorder {
	for w != nil {
		if rec, ok := w.(*cache.Recorder); ok {
			return rec
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// noteUnary tells a recording cache that a unary answer was written
// whole, and what it cost.
func (s *Plane) noteUnary(w http.ResponseWriter, res *proxy.Result, rt *route.Route) {
	rec := cacheRecorder(w)
	if rec == nil {
		return
	}
	u := proxy.SpendUsage(res.Usage)
	u.CostNanoUSD = spend.ReportedBill(res.Body)
	s.note(rec, res, rt, res.Usage.Known || u.CostNanoUSD != nil, u, true)
}

// noteStream tells a recording cache how a relayed stream ended, and what
// it cost (unknown without tracking's usage or a provider bill).
func (s *Plane) noteStream(w http.ResponseWriter, res *proxy.Result, rt *route.Route, st *track.Stream, outcome string) {
	rec := cacheRecorder(w)
	if rec == nil {
		return
	}
	var u admit.Usage
	known := st != nil && st.Usage.Known
	if known {
		u = proxy.SpendUsage(st.Usage)
	}
	u.CostNanoUSD = res.Bill
	s.note(rec, res, rt, known || res.Bill != nil, u, outcome == streamCompleted)
}

func (s *Plane) note(rec *cache.Recorder, res *proxy.Result, rt *route.Route, known bool, u admit.Usage, complete bool) {
	n := cache.Note{Complete: complete, Provider: res.Candidate.Provider, ProviderModel: res.Candidate.Model}
	if rt = servedRoute(res, rt); rt != nil {
		n.ServedModel = rt.Model.Name
	}
	if known {
		n.CostNano, n.Priced = s.Admission.CostNano(res.Candidate.Provider, res.Candidate.Model, u)
	}
	rec.Note(n)
}

// maxEmbeddingAnswer bounds the embeddings answer read for a semantic
// lookup (the body is already bounded by the buffer budget; this bounds
// what is parsed).
const maxEmbeddingAnswer = 4 << 20

// embedder embeds the semantic cache's text through the gateway's own
// routing: the embedding model's providers, fallbacks and admission,
// under the caller's identity. The caller pays: the call is admitted
// against its limits and budget, and its cost and attempt are part of
// the request's usage row.
func (s *Plane) embedder(r *http.Request, in *incoming) cache.Embedder {
	return func(ctx context.Context, model, text string) ([]float64, error) {
		rt := in.snap.Routes.Lookup(model)
		if rt == nil {
			return nil, fmt.Errorf("embedding model %q is not configured", model)
		}
		body, err := json.Marshal(map[string]string{"model": model, "input": text})
		if err != nil {
			return nil, err
		}
		ein := &incoming{snap: in.snap, id: in.id, body: body, model: model, rt: rt}
		call := s.call(r, ein, provider.Embeddings, body)
		// One request of the caller's, as do makes it (its tenant counters
		// count once whatever the retries), but not do itself: the usage
		// row's provider is the answer's, not the embedding's.
		ctx, rq := admit.WithRequest(ctx)
		res, fail := s.serve(ctx, ein, call)
		if fail != nil {
			s.Admission.Unanswered(rq)
			return nil, embedFailure(model, fail)
		}
		defer res.Close()
		if res.Events != nil || len(res.Body) > maxEmbeddingAnswer {
			return nil, errors.New("the embedding answer is not a bounded unary body")
		}
		v := gjson.GetBytes(res.Body, "data.0.embedding")
		if !v.IsArray() {
			return nil, errors.New("the embedding answer has no data[0].embedding array")
		}
		var out []float64
		ok := true
		v.ForEach(func(_, x gjson.Result) bool {
			ok = x.Type == gjson.Number && len(out) < cache.MaxDims
			out = append(out, x.Float())
			return ok
		})
		if !ok {
			return nil, errors.New("the embedding is not a list of at most cache.MaxDims numbers")
		}
		return out, nil
	}
}

// embedFailure says why the embedding call found no answer (for the log).
func embedFailure(model string, fail *proxy.Failure) error {
	switch {
	case fail.Refusal != nil:
		return fmt.Errorf("the embedding call to %s was refused: %s", model, fail.Refusal.Message)
	case len(fail.Attempts) > 0:
		a := fail.Attempts[len(fail.Attempts)-1]
		return fmt.Errorf("the embedding call to %s failed: %s (status %d, %d attempts)", model, a.Reason, a.Status, len(fail.Attempts))
	}
	return fmt.Errorf("the embedding call to %s failed", model)
}
