package inference

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"switchboard/internal/admit"
	"switchboard/internal/front"
	"switchboard/internal/jsoncheck"
	"switchboard/internal/proxy"
	"switchboard/internal/redact"
	"switchboard/internal/tenant"
	"switchboard/internal/translate"
)

// failed answers a loop that found no answer.
func (s *Plane) failed(w http.ResponseWriter, r *http.Request, proto front.Protocol, in *incoming, fail *proxy.Failure) {
	s.Prober.AfterRequest(in.rt)
	switch {
	case fail.Canceled:
		s.Log.InfoContext(r.Context(), "client went away before an answer", "model", in.model)
	case fail.Refusal != nil:
		s.writeRefusal(w, proto, in.id, skippedRefusal(fail, in))
	default:
		writeFailure(w, proto, fail, in.snap.Secrets, s.untried(r, in, fail))
	}
}

// skippedRefusal is the answer when the gateway itself passed over the
// providers (provider-scoped refusals) and none was left. An admin is told
// each provider and why; a tenant the same verdict without provider names.
// A request-scoped refusal (the caller's own limit) is returned as is.
func skippedRefusal(fail *proxy.Failure, in *incoming) *admit.Refusal {
	last := fail.Refusal
	if last.Scope != admit.ScopeProvider || len(fail.Skipped) == 0 {
		return last
	}
	out := *last
	if tenant.Operator(in.id) {
		var b strings.Builder
		fmt.Fprintf(&b, "no provider of model %q could take this request:", in.model)
		for i, sk := range fail.Skipped {
			if i > 0 {
				b.WriteString(";")
			}
			fmt.Fprintf(&b, " %s (model %s): %s", sk.Provider, sk.Model, sk.Refusal.Message)
		}
		out.Message = b.String()
		return &out
	}
	n := len(fail.Skipped)
	switch last.Code {
	case admit.CodeUnpriceable:
		out.Message = fmt.Sprintf("the cost of this request cannot be bounded under your budget on any of the %d provider entries of model %q "+
			"(unknown price or output limit); set max_tokens, use another model, or ask the operator for budget_allow_unpriced", n, in.model)
	case admit.CodeRequestTooCostly:
		// Its message names amounts and max_tokens, no provider.
	case admit.CodeOverloaded:
		out.Message = fmt.Sprintf("every provider of model %q is at its concurrency limit; retry later", in.model)
	default:
		out.Message = fmt.Sprintf("every provider of model %q is at its rate limit; retry in %d s", in.model, last.RetryAfter)
	}
	return &out
}

// FailureDetail is the `detail` of an all-providers-failed error.
type FailureDetail struct {
	Attempts    []proxy.Attempt `json:"attempts"`
	DeadlineHit bool            `json:"deadline_hit"`
	// Skipped are the model's providers never sent to (see untried).
	Skipped []proxy.Attempt `json:"skipped,omitempty"`
}

// writeFailure answers a loop that found no provider. A single provider's
// own error passes through untouched (status and body) when it was the
// only one the model could use; otherwise the client gets the gateway's
// summary with every attempt and every provider skipped.
//
// Provider keys (secrets) are masked in what passes through: an upstream
// may echo the request's Authorization header in its error.
func writeFailure(w http.ResponseWriter, proto front.Protocol, f *proxy.Failure, secrets *redact.Secrets, skipped []proxy.Attempt) {
	last := f.Last
	if last != nil && last.Status >= 400 && len(last.Body) > 0 && singleProvider(f.Attempts) && len(skipped) == 0 && jsoncheck.Valid(last.Body) &&
		gjson.GetBytes(last.Body, "error").Exists() {
		h := w.Header()
		front.CopyUpstreamHeaders(h, last.Header)
		secrets.Header(h)
		h.Set("Content-Type", "application/json")
		body := secrets.Bytes(last.Body)
		if proto == front.Anthropic && gjson.GetBytes(body, "type").String() != "error" {
			body = translate.ErrorToAnthropic(last.Status, body)
		}
		w.WriteHeader(last.Status)
		_, _ = w.Write(body)
		return
	}
	status := http.StatusBadGateway
	if last != nil && last.Status >= 400 && last.Status <= 599 {
		status = last.Status
	}
	if f.DeadlineHit && status == http.StatusBadGateway {
		status = http.StatusGatewayTimeout
	}
	var b strings.Builder
	b.WriteString("All providers failed: ")
	for i, a := range f.Attempts {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(a.Provider)
		b.WriteString(": ")
		b.WriteString(a.Reason)
		if a.Status != 0 {
			b.WriteString(" (status=")
			b.WriteString(strconv.Itoa(a.Status))
			b.WriteString(")")
		}
	}
	for i, a := range skipped {
		if i > 0 || len(f.Attempts) > 0 {
			b.WriteString("; ")
		}
		b.WriteString(a.Provider)
		b.WriteString(": ")
		b.WriteString(a.Reason)
	}
	if len(f.Attempts)+len(skipped) == 0 {
		b.WriteString("no provider was available")
	}
	if f.DeadlineHit {
		b.WriteString("; request deadline reached")
	}
	e := &front.Error{Status: status, Type: front.GatewayErrors.For(status), Code: "all_failed", Message: b.String(),
		Detail: FailureDetail{Attempts: f.Attempts, DeadlineHit: f.DeadlineHit, Skipped: skipped}}
	if status == 429 || status == 503 {
		if last != nil && last.Header != nil && last.Header.Get("Retry-After") != "" {
			w.Header().Set("Retry-After", secrets.String(last.Header.Get("Retry-After")))
		}
	}
	front.WriteError(w, proto, e)
}

func singleProvider(a []proxy.Attempt) bool {
	for i := 1; i < len(a); i++ {
		if a[i].Provider != a[0].Provider {
			return false
		}
	}
	return len(a) > 0
}
