package inference

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"switchboard/internal/dispatch"
	"switchboard/internal/front"
	"switchboard/internal/jsoncheck"
	"switchboard/internal/limit"
	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/reqcheck"
	"switchboard/internal/snapshot"
	"switchboard/internal/tenant"
)

// Endpoint serves one of the OpenAI endpoints.
func (s *Plane) Endpoint(ep provider.Endpoint) front.Handler {
	return func(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity) {
		in := s.prepare(w, r, snap, id, front.OpenAI, ep)
		if in == nil {
			return
		}
		defer in.release()
		if ep == provider.Embeddings {
			in.stream = false
		}
		w, r, u := s.beginUsage(w, r, in, ep)
		defer s.endUsage(r, u)
		s.idempotent(w, r, front.OpenAI, in, s.cached(r, front.OpenAI, cacheProtocol(ep), in, func(w http.ResponseWriter) {
			if s.queued(r) {
				s.dispatch(w, r, front.OpenAI, ep, in)
				return
			}
			call := s.call(r, in, ep, in.body)
			res, fail := s.do(r.Context(), in, call)
			if fail != nil {
				s.failed(w, r, front.OpenAI, in, fail)
				return
			}
			defer res.Close()
			s.advise(w, in, res)
			s.relay(w, r, res, ep, in.rt, call.Opts.Inspect || call.Meter)
		}))
	}
}

// modelNotFound is also the answer for a model the key may not use
// (OpenAI's convention: "does not exist or you do not have access"), so
// that a limited key learns nothing about the models it cannot call.
func modelNotFound(name string) *front.Error {
	return &front.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model %q does not exist or this key may not use it; GET /v1/models lists the models it may use", front.Shown(name))}
}

// inspectBody validates the JSON envelope and reads model and stream
// (on a refusal: what it read, for the usage row). A
// duplicate top-level key is refused: parsers disagree on which copy wins,
// so routing, billing and the upstream could each see another model. So
// is a key differing only by case from a field the gateway reads, or such
// a field holding a value of another kind (reqcheck), on every endpoint.
func inspectBody(body []byte, ep provider.Endpoint) (model string, stream bool, e *front.Error) {
	if !jsoncheck.DepthOK(body, jsoncheck.MaxDepth) {
		return "", false, front.Invalid(fmt.Sprintf("request body nests arrays or objects deeper than %d levels", jsoncheck.MaxDepth))
	}
	if !gjson.ValidBytes(body) { // depth checked just above
		var v json.RawMessage
		msg := "not valid JSON"
		if _, m, ok := jsoncheck.DecodeError(json.Unmarshal(body, &v)); ok {
			msg = m
		}
		return "", false, front.Invalid("request body is " + msg)
	}
	// The body is never modified after this point, so the parse may alias
	// it instead of copying it into a string (a 50 KB body, 50 KB saved).
	root := gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body)))
	if !root.IsObject() {
		return "", false, front.Invalid("request body must be a JSON object")
	}
	var seen [16]string
	keys := seen[:0]
	var many map[string]bool // past 16 keys: a scan per key would be quadratic (200k keys held a core for minutes)
	root.ForEach(func(k, v gjson.Result) bool {
		dup := many[k.Str]
		if many == nil {
			dup = slices.Contains(keys, k.Str)
			if keys = append(keys, k.Str); len(keys) > len(seen) {
				many = make(map[string]bool, 2*len(keys))
				for _, s := range keys {
					many[s] = true
				}
			}
		}
		if dup {
			e = front.Invalid(fmt.Sprintf("duplicate key %q in the request body", front.Shown(k.Str)))
			e.Param = front.Shown(k.Str)
			return false
		}
		if many != nil {
			many[k.Str] = true
		}
		switch k.Str {
		case "model":
			if v.Type == gjson.String {
				model = strings.Clone(v.Str) // outlives the request in logs and metrics
			}
		case "stream":
			stream = v.Type == gjson.True
		case "n":
			e = checkN(v)
			return e == nil
		}
		return true
	})
	if e == nil && model != "" {
		if p := reqcheck.Check(string(ep), root); p != nil {
			e = front.Invalid(p.Message)
			e.Param = p.Param
		}
	}
	if e != nil {
		if strings.EqualFold(e.Param, "model") {
			model = "" // twice: which one the client meant is the question
		}
		return model, stream, e // for the refusal's usage row
	}
	if model == "" {
		e = front.Invalid("missing required field \"model\" (a non-empty string)")
		e.Param = "model"
		return "", false, e
	}
	return model, stream, nil
}

// MaxN bounds a request's candidate count n, as OpenAI's API does: each
// candidate is a whole answer, so an absurd n is a mistake, and one
// billed n times would otherwise be refused for its price with advice
// about the prompt or max_tokens.
const MaxN = 128

// checkN refuses an n that is not an integer from 1 to MaxN (null is
// absent), before the request is priced or sent.
func checkN(v gjson.Result) *front.Error {
	if v.Type == gjson.Null {
		return nil
	}
	if n, ok := limit.UnsignedInt(v); ok && n >= 1 && n <= MaxN {
		return nil
	}
	got := v.Raw
	if len(got) > 40 {
		got = got[:40] + "..." // the value is the client's; the message stays short
	}
	e := front.Invalid(fmt.Sprintf("n must be an integer from 1 to %d, got %s", MaxN, got))
	e.Param = "n"
	return e
}

func forwardHeaders(r *http.Request) http.Header {
	var h http.Header
	for _, k := range front.Forwarded {
		if v := r.Header.Values(k); len(v) > 0 {
			if h == nil {
				h = make(http.Header, 2)
			}
			h[k] = v
		}
	}
	return h
}

// prepare reads and checks the body of an authenticated request, takes
// the logical preparation slot and resolves the model. It writes every
// refusal itself (nil = answered); the caller releases the slot when the
// answer ends.
func (s *Plane) prepare(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity, proto front.Protocol, ep provider.Endpoint) *incoming {
	return s.prepareFor(w, r, snap, id, proto, ep, "", false)
}

// prepareFor is prepare for a protocol that names the model (and the
// stream) in the URL, as Gemini does: urlModel, when not "", is the model
// and urlStream the stream flag; the body needs no "model".
func (s *Plane) prepareFor(w http.ResponseWriter, r *http.Request, snap *snapshot.Snapshot, id *tenant.Identity, proto front.Protocol,
	ep provider.Endpoint, urlModel string, urlStream bool) *incoming {
	body, aerr := front.ReadBody(r, w, snap.Config.Limits.MaxRequestBody, snap.Config.Limits.BodyTimeout.D())
	if aerr != nil {
		front.WriteError(w, proto, aerr)
		s.refusedUsage(r, id, urlModel, urlStream, aerr.Status)
		return nil
	}
	model, stream, aerr := inspectBody(body, ep)
	if urlModel != "" {
		model, stream = urlModel, urlStream
		if aerr != nil && aerr.Param == "model" && aerr.Code == "invalid_request" && !bytesHasKey(body, "model") {
			aerr = nil // the URL names it
		}
		if aerr == nil {
			// inspectBody checks a body that names its model; this one's
			// model is in the URL.
			if p := reqcheck.Check(string(ep), gjson.ParseBytes(body)); p != nil {
				aerr = front.Invalid(p.Message)
				aerr.Param = p.Param
			}
		}
	}
	if aerr != nil {
		front.WriteError(w, proto, aerr)
		s.refusedUsage(r, id, model, stream, aerr.Status)
		return nil
	}
	in := &incoming{snap: snap, id: id, body: body, model: model, stream: stream}
	if !s.requestTags(w, r, proto, in) {
		s.refusedUsage(r, id, model, stream, http.StatusBadRequest)
		return nil
	}
	release, ref := s.Admission.Enter(r.Context(), id)
	if ref != nil {
		status := front.StatusClientClosed
		if ref.Code != "canceled" {
			s.writeRefusal(w, proto, id, ref)
			status = ref.Status
		}
		s.refusedUsage(r, id, model, stream, status)
		return nil
	}
	rt := snap.Routes.Lookup(model)
	if rt == nil || !id.MayUse(rt.Model.Name) {
		release()
		front.WriteError(w, proto, modelNotFound(model))
		s.refusedUsage(r, id, model, stream, http.StatusNotFound)
		return nil
	}
	in.rt, in.release = rt, release
	s.observed(r, in)
	return in
}

// call builds the attempt loop's input for in.
func (s *Plane) call(r *http.Request, in *incoming, ep provider.Endpoint, body []byte) *proxy.Call {
	c := &proxy.Call{Endpoint: ep, Body: body, Stream: in.stream, Header: forwardHeaders(r), Route: in.rt,
		Order: s.Selector.OrderBody(in.rt, body), Opts: options(in.snap.Config, in.rt.Model, ep),
		Identity: in.id, ClientModel: in.model, Meter: needsUsage(in.snap, in.id) || in.snap.Config.Tracking.On()}
	if jc := dispatch.JobOf(r.Context()); jc != nil {
		// The total deadline covers the queue wait too; it never grows.
		c.Opts.Deadline = min(c.Opts.Deadline, jc.Left)
	}
	return c
}

// needsUsage: budgets and token buckets settle on the provider's reported
// usage, so streams must carry it. With tracking on, streams ask for it
// anyway (and hide it from a client that did not): the stream's log line
// and routing samples carry real prompt and completion counts.
func needsUsage(snap *snapshot.Snapshot, id *tenant.Identity) bool {
	return snap.AnyTPM || id != nil && (id.BudgetNano != nil || id.TPM != nil || id.KeyBudgetNano != nil || id.KeyTPM != nil)
}

// bytesHasKey reports whether the JSON object body has a top-level key.
func bytesHasKey(body []byte, key string) bool {
	return gjson.GetBytes(body, gjson.Escape(key)).Exists()
}
