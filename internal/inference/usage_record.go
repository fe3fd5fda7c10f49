package inference

import (
	"context"
	"net/http"
	"strings"

	"switchboard/internal/admit"
	"switchboard/internal/front"
	"switchboard/internal/provider"
	"switchboard/internal/proxy"
	"switchboard/internal/tags"
	"switchboard/internal/tenant"
	"switchboard/internal/usagelog"
)

// usageRecord is one request's usage-log row in the making: the attempt
// loop's permits add their settled charges to tally (see admit.Tally),
// the answer's writer notes the status.
type usageRecord struct {
	row   usagelog.Row
	tally admit.Tally
	w     *usageWriter // &wr: one allocation for both
	wr    usageWriter
	// ingress: a queued request refused before it was enqueued (the queue
	// full or unreachable); no worker records it, so the ingress does.
	ingress bool
	// tags are the request's, for the tag metric.
	tags tags.Set
}

type usageRecordKey struct{}

// beginUsage starts the row of an accepted request (authenticated, body
// checked, model known; see refusedUsage for the refusals before that). It returns the writer and request to serve with; u
// is nil when the usage log is off.
func (s *Plane) beginUsage(w http.ResponseWriter, r *http.Request, in *incoming, ep provider.Endpoint) (http.ResponseWriter, *http.Request, *usageRecord) {
	if s.UsageLog() == nil {
		return w, r, nil
	}
	u := &usageRecord{wr: usageWriter{ResponseWriter: w}, row: s.usageRow(r, in.id, in.model, string(ep), in.stream), tags: in.tags}
	u.w = &u.wr
	u.row.Tags = in.tags.Map()
	ctx := context.WithValue(admit.WithTally(r.Context(), &u.tally), usageRecordKey{}, u)
	return u.w, r.WithContext(ctx), u
}

// refusedUsage records the row of an authenticated request refused
// before it was served (unreadable or invalid body, the preparation slot,
// an unknown or forbidden model): no attempts, no cost, but the operator
// sees which key sends what. A request without a valid key has no tenant
// to log it under; the access log and metrics count it.
func (s *Plane) refusedUsage(r *http.Request, id *tenant.Identity, model string, stream bool, status int) {
	l := s.UsageLog()
	if l == nil {
		return
	}
	row := s.usageRow(r, id, usagelog.ClientText(model), strings.TrimPrefix(r.URL.Path, "/v1/"), stream)
	row.Status = status
	l.Record(row)
}

// usageRow is a row's start: who asked what, and when.
func (s *Plane) usageRow(r *http.Request, id *tenant.Identity, model, endpoint string, stream bool) usagelog.Row {
	row := usagelog.Row{Time: s.Clock.Now(), RequestID: front.RequestID(r.Context()), Tenant: id.Label(), Model: model,
		Endpoint: endpoint, Stream: stream}
	if id != nil {
		row.KeyID = id.KeyID
	}
	return row
}

// endUsage records the row once every attempt of the request has ended
// (a hedge's losing side may end after the answer). A request handed to
// the queue is recorded by the worker that runs it, not by the ingress.
func (s *Plane) endUsage(r *http.Request, u *usageRecord) {
	if u == nil || s.queued(r) && !u.ingress {
		return
	}
	row := u.row
	row.Status = u.w.status
	if row.Status == 0 {
		row.Status = front.StatusClientClosed // nothing was written: the client left first
	}
	row.DurationMs = s.Clock.Now().Sub(row.Time).Milliseconds()
	l := s.UsageLog()
	u.tally.Close(func(t admit.TallyTotals) {
		row.Attempts = t.Attempts
		row.PromptTokens, row.CompletionTokens = t.Input, t.Output
		row.CostNano, row.HeldNano, row.Unpriced = t.Cost, t.Held, t.Unpriced
		l.Record(row)
		s.Meter.Observe(u.tags, t.Cost)
	})
}

// do serves the call (the attempt loop and the model's fallbacks) as one
// request of the caller's, noting in the request's usage row who served.
func (s *Plane) do(ctx context.Context, in *incoming, c *proxy.Call) (*proxy.Result, *proxy.Failure) {
	// One client request: its tenant counters count once (see admit.Request).
	ctx, rq := admit.WithRequest(ctx)
	res, fail := s.serve(ctx, in, c)
	if fail != nil {
		s.Admission.Unanswered(rq)
	}
	if u, _ := ctx.Value(usageRecordKey{}).(*usageRecord); u != nil && res != nil {
		u.row.Provider, u.row.ProviderModel = res.Candidate.Provider, res.Candidate.Model
		u.row.ServedModel = in.model
		if res.Route != nil {
			u.row.ServedModel = res.Route.Model.Name // a fallback's, when one served
		}
		if res.Events != nil && !res.FirstToken.IsZero() {
			// What the client waited for its first token, from arrival.
			ms := max(res.FirstToken.Sub(u.row.Time).Milliseconds(), 0)
			u.row.TTFTMs = &ms
		}
	}
	return res, fail
}

// usageWriter notes the answer's status for the usage row.
type usageWriter struct {
	http.ResponseWriter
	status int
}

func (w *usageWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *usageWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *usageWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Answered passes the metrics' early count through (see statusWriter).
func (w *usageWriter) Answered() {
	if a, ok := w.ResponseWriter.(interface{ Answered() }); ok {
		a.Answered()
	}
}

func (w *usageWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
