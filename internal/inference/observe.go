package inference

import (
	"context"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"

	"switchboard/internal/front"
	"switchboard/internal/proxy"
	"switchboard/internal/tags"
	"switchboard/internal/tracing"
	"switchboard/internal/track"
)

// The inference plane's part of tracing, tags and alerts, which are
// packages of their own: the handlers call the few functions here.

// requestTags reads the request's tags (the header; the body's metadata
// on chat completions and responses when tags.from_metadata) and checks
// them against the caller's tenant's rules (the snapshot's); a refusal is
// answered (400 invalid_tags, naming the tag) and reported false.
func (s *Plane) requestTags(w http.ResponseWriter, r *http.Request, proto front.Protocol, in *incoming) bool {
	ts, terr := tags.Parse(r.Header.Values(tags.Header))
	if terr == nil && in.snap.Config.Tags.FromMetadata && (r.URL.Path == "/v1/chat/completions" || r.URL.Path == "/v1/responses") {
		if md := gjson.GetBytes(in.body, "metadata"); md.IsObject() {
			ts, terr = ts.Merge(func(yield func(k, v string, isString bool) bool) {
				md.ForEach(func(k, v gjson.Result) bool { return yield(k.Str, v.Str, v.Type == gjson.String) })
			})
		}
	}
	if terr == nil {
		tenantName := ""
		if in.id != nil {
			tenantName = in.id.Tenant
		}
		terr = in.snap.Tags.For(tenantName).Check(ts, tags.Header)
	}
	if terr != nil {
		front.WriteError(w, proto, &front.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_tags",
			Param: terr.Param, Message: terr.Message})
		return false
	}
	in.tags = ts
	return true
}

// observed notes an accepted request: who asked for what on its span
// (with its messages when content capture is on), and, for a caller with
// a budget, a budget check once the request ends.
func (s *Plane) observed(r *http.Request, in *incoming) {
	ctx := r.Context()
	if tracing.Recording(ctx) {
		tenantName, keyID := "", ""
		if in.id != nil {
			tenantName, keyID = in.id.Label(), in.id.KeyID
		}
		tracing.Caller(ctx, tenantName, keyID, in.model, strings.TrimPrefix(r.URL.Path, "/v1/"), in.tags)
		s.Tracer.Input(ctx, in.body)
	}
	if s.Alerts == nil {
		return
	}
	if n := s.Alerts(); n != nil && in.id != nil && (in.id.Budgeted() || in.id.KeyBudgetNano != nil) {
		release, id := in.release, in.id
		in.release = func() {
			release()
			n.Note(id)
		}
	}
}

// traceStream ends a relayed stream's attempt span: the model and finish
// reasons the events named, its usage, the relay's outcome and the spend
// settled.
func traceStream(res *proxy.Result, st *track.Stream, outcome string) {
	if res.Trace == nil {
		return
	}
	if st != nil {
		res.Trace.Streamed(st.Model, st.Finish, outcome)
		res.Trace.Usage(st.Usage.Input, st.Usage.Output, st.Usage.Known)
	} else {
		res.Trace.Streamed("", nil, outcome)
	}
	if c := res.Permit.Cost(); c > 0 {
		res.Trace.Settled(c)
	}
	res.Trace.End()
}

// traceFallback notes a cross-model fallback on the request's span.
func traceFallback(ctx context.Context, from, to, condition string) {
	if tracing.Recording(ctx) {
		tracing.Event(ctx, "switchboard.fallback", attribute.String("from", from), attribute.String("to", to),
			attribute.String("condition", condition))
	}
}
