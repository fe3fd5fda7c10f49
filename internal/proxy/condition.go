package proxy

import (
	"bytes"
	"errors"

	"switchboard/internal/admit"
	"switchboard/internal/config"
	"switchboard/internal/provider"
	"switchboard/internal/route"
)

// conditions tallies why a loop's attempts failed, for cross-model
// fallbacks (Failure.Condition).
type conditions struct {
	contextWindow, contentPolicy bool
	// rateLimited, clientErrors, budget and others count attempts: rate
	// limited (upstream 429/quota, or the provider's own bucket at the
	// gateway), refused as invalid (4xx), passed over for the caller's
	// budget, anything else.
	rateLimited, clientErrors, budget, others int
}

// add merges another tally (a hedged side's) into c.
func (c *conditions) add(o conditions) {
	c.contextWindow = c.contextWindow || o.contextWindow
	c.contentPolicy = c.contentPolicy || o.contentPolicy
	c.rateLimited += o.rateLimited
	c.clientErrors += o.clientErrors
	c.budget += o.budget
	c.others += o.others
}

// note records one failed attempt.
func (f *Failure) note(perr *provider.Error, reason string) {
	switch {
	case ContextWindowError(perr):
		f.seen.contextWindow = true
	case ContentPolicyError(perr):
		f.seen.contentPolicy = true
	case reason == "rate_limited" || reason == "quota_exhausted":
		f.seen.rateLimited++
	case reason == "client_error" && !providerRefusal(perr.Status):
		f.seen.clientErrors++
	default:
		f.seen.others++
	}
}

// notePaused records providers left out because their pause was still
// running: rate limited, without a send (reason "paused").
func (f *Failure) notePaused(c *Call, order []*route.Candidate) {
	for _, cand := range order {
		f.Attempts = append(f.Attempts, c.attemptOf(cand, 0, "paused"))
		f.seen.rateLimited++
	}
}

// providerRefusal: a 4xx about the provider's side, not the request: its
// key (401), its permissions (403 without a quota), its model name (404).
// Another model may serve, so it is an error for fallbacks.
func providerRefusal(status int) bool {
	return status == 401 || status == 403 || status == 404
}

// noteRefusal records a provider the gateway passed over.
func (f *Failure) noteRefusal(ref *admit.Refusal) {
	switch {
	case ref.Code == admit.CodeRequestTooCostly || ref.Code == admit.CodeUnpriceable:
		f.seen.budget++ // the caller's budget, on this provider's price
	case ref.Status == 429:
		f.seen.rateLimited++ // the provider's own rpm/tpm bucket
	default:
		f.seen.others++
	}
}

// Condition is the fallback condition (config.Fallback*) a failed loop
// meets, or "" when no other model should be tried: the client left, the
// caller's own limit or budget refused it, or every provider refused the
// request as invalid. A context-window or content-policy refusal by any
// provider names the failure; rate_limit needs every attempt to have been
// rate limited, budget every provider to have been passed over for the
// caller's budget; anything else is error.
func (f *Failure) Condition() string {
	s := f.seen
	switch {
	case f.Canceled:
		return ""
	case f.Refusal != nil && f.Refusal.Scope != admit.ScopeProvider:
		return ""
	case s.contextWindow:
		return config.FallbackContextWindow
	case s.contentPolicy:
		return config.FallbackContentPolicy
	case s.rateLimited > 0 && s.clientErrors == 0 && s.others == 0 && s.budget == 0:
		return config.FallbackRateLimit
	case s.budget > 0 && s.clientErrors == 0 && s.others == 0 && s.rateLimited == 0:
		return config.FallbackBudget
	case s.others == 0 && s.rateLimited == 0 && s.budget == 0 && s.clientErrors > 0:
		return ""
	}
	return config.FallbackError
}

// Markers of a prompt that does not fit the model, lower-cased: OpenAI's
// code context_length_exceeded and its "maximum context length" message
// (also vLLM's, Mistral's, Groq's), Anthropic's "prompt is too long: N
// tokens > M maximum" and "input length and `max_tokens` exceed context
// limit", Gemini's "The input token count (N) exceeds the maximum number
// of tokens allowed (M)".
var contextMarkers = [][]byte{
	[]byte("context_length_exceeded"), []byte("maximum context length"), []byte("prompt is too long"),
	[]byte("exceed context limit"), []byte("exceeds the maximum number of tokens"),
	[]byte("context window"), []byte("context_window_exceeded"),
}

// Markers of a content refusal, lower-cased: OpenAI's
// content_policy_violation, Azure OpenAI's content_filter code (and its
// ResponsibleAIPolicyViolation), Anthropic's "Output blocked by content
// filtering policy", a Gemini prompt blocked for safety (translated into a
// content_filter error), Gemini's SAFETY / PROHIBITED_CONTENT blocks.
var contentMarkers = [][]byte{
	[]byte("content_policy_violation"), []byte(`"content_filter"`), []byte("responsibleaipolicyviolation"),
	[]byte("content filtering policy"), []byte("content management policy"), []byte("blocked by the provider's safety"),
	[]byte("prohibited_content"), []byte("blockreason"),
}

// ContextWindowError reports whether a provider refused the request as
// too long for the model's context window.
func ContextWindowError(perr *provider.Error) bool {
	return refusalBody(perr) && containsAny(perr.Body, contextMarkers)
}

// ContentPolicyError reports whether a provider refused the request (or
// its answer) for its content.
func ContentPolicyError(perr *provider.Error) bool {
	return refusalBody(perr) && containsAny(perr.Body, contentMarkers)
}

// refusalBody: a 4xx answer, or an error event before the first token,
// with a body to read.
func refusalBody(perr *provider.Error) bool {
	if perr == nil || len(perr.Body) == 0 {
		return false
	}
	switch perr.Kind {
	case provider.KindHTTP:
		// A rate or quota answer may mention tokens; it is a rate limit.
		return perr.Status >= 400 && perr.Status < 500 && perr.Status != 429 && perr.Status != 402
	case provider.KindBadResponse:
		return errors.Is(perr.Err, errStreamError)
	}
	return false
}

// maxScan bounds how much of an error body is searched.
const maxScan = 64 << 10

func containsAny(body []byte, markers [][]byte) bool {
	if len(body) > maxScan {
		body = body[:maxScan]
	}
	low := bytes.ToLower(body)
	for _, m := range markers {
		if bytes.Contains(low, m) {
			return true
		}
	}
	return false
}

// allPaused reports whether every provider of order is quota-paused now.
func (p *Proxy) allPaused(order []*route.Candidate) bool {
	if p.Health == nil {
		return false
	}
	for _, c := range order {
		if p.Health.Status(c.Provider).PausedUntil.IsZero() {
			return false
		}
	}
	return len(order) > 0
}

// RefusedAfterOutage reports whether f, a fallback model's failure, is
// the gateway refusing the request (the caller's own limit or budget, the
// gateway's) after prev, the previous model's, saw its providers fail:
// the answer is then prev, the outage, never a refusal of an attempt the
// client did not ask for.
func (f *Failure) RefusedAfterOutage(prev *Failure) bool {
	return f.Refusal != nil && f.Refusal.Scope == admit.ScopeRequest && prev.Last != nil && prev.Last.Kind != provider.KindRefused
}
