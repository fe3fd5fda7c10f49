package inference

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"switchboard/internal/front"
	"switchboard/internal/jsoncheck"
	"switchboard/internal/proxy"
	"switchboard/internal/redact"
	"switchboard/internal/translate"
)

// FailureDetail is the `detail` of an all-providers-failed error.
type FailureDetail struct {
	Attempts    []proxy.Attempt `json:"attempts"`
	DeadlineHit bool            `json:"deadline_hit"`
}

// writeFailure answers a loop that found no provider. A single provider's
// own error passes through untouched (status and body); otherwise the
// client gets the gateway's summary with every attempt.
//
// Provider keys (secrets) are masked in what passes through: an upstream
// may echo the request's Authorization header in its error.
func writeFailure(w http.ResponseWriter, proto front.Protocol, f *proxy.Failure, secrets *redact.Secrets) {
	last := f.Last
	if last != nil && last.Status >= 400 && len(last.Body) > 0 && singleProvider(f.Attempts) && jsoncheck.Valid(last.Body) &&
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
	if len(f.Attempts) == 0 {
		b.WriteString("no provider was available")
	}
	if f.DeadlineHit {
		b.WriteString("; request deadline reached")
	}
	e := &front.Error{Status: status, Type: front.GatewayErrors.For(status), Code: "all_failed", Message: b.String(),
		Detail: FailureDetail{Attempts: f.Attempts, DeadlineHit: f.DeadlineHit}}
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
