// Package cloud holds what the cloud providers (azure, bedrock, vertex)
// share: how a credential that cannot be had or that the cloud refuses
// becomes an attempt's error, the cloud's reason for a refusal (shown in
// the log line of the failed attempt, never a secret), and how long an
// attempt may wait for a credential.
package cloud

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/tidwall/gjson"

	"switchboard/internal/provider"
	"switchboard/internal/provider/bearer"
	"switchboard/internal/translate"
)

// CodeCredentials is the error code of a credential that could not be
// obtained or that the cloud refused.
const CodeCredentials = "upstream_credentials"

// OpenTimeout is the shared client's current timeouts.open: the longest
// an attempt waits for a credential source (a token endpoint, a metadata
// server, STS) before it fails instead of hanging.
func OpenTimeout(c *http.Client) time.Duration {
	if c != nil {
		if p, ok := c.Transport.(*provider.Pool); ok && p.Options().Open > 0 {
			return p.Options().Open
		}
	}
	return 30 * time.Second
}

// maxReason bounds the cloud's reason as logged.
const maxReason = 300

// Reason is the human message of an error body in OpenAI's shape (or
// any shape translate reads), bounded, on one line and printable.
func Reason(body []byte) string {
	msg := gjson.GetBytes(body, "error.message").String()
	if msg == "" {
		msg = gjson.GetBytes(body, "message").String()
	}
	return Clean(msg)
}

// Clean makes s safe for one log field: control characters become
// spaces, and it is cut to a bounded length.
func Clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
	if len(s) > maxReason {
		s = s[:maxReason] + "..."
	}
	return s
}

// Refused is a non-2xx answer of the cloud whose body is already in
// OpenAI's shape. A 401 or 403 (a bad or expired credential) carries the
// cloud's reason in Msg, so that the attempt's one log line says why.
func Refused(status int, h http.Header, body []byte) *provider.Error {
	e := provider.StatusError(status, h, body)
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		if r := Reason(body); r != "" {
			e.Msg = r
		}
	}
	return e
}

// AuthFailed is a credential the issuer refused or that cannot be read
// (a revoked secret, a malformed key file, no credentials found): a 401
// in OpenAI's shape, not retried on the same provider.
func AuthFailed(name, cloudName, reason string) *provider.Error {
	reason = Clean(reason)
	msg := "provider " + name + " could not authenticate to " + cloudName + ": " + reason
	body := translate.OpenAIError(http.StatusUnauthorized, msg, "", CodeCredentials)
	return &provider.Error{Kind: provider.KindHTTP, Status: http.StatusUnauthorized, Body: body, Msg: reason}
}

// statusCoder is an error that carries the HTTP status of the issuer's
// answer (AWS SDK errors do).
type statusCoder interface{ HTTPStatusCode() int }

// CredentialError classifies a failure to obtain a credential for one
// attempt: the bound passed (a timeout), a network failure reaching the
// issuer (retryable), an issuer 5xx (retryable), anything else a refused
// or unusable credential (AuthFailed). status is the issuer's HTTP status
// and reason its message when the caller could read them (0 and "" when
// not: err's text is the reason then).
func CredentialError(ctx context.Context, name, cloudName string, status int, reason string, err error) *provider.Error {
	var sc statusCoder
	if status == 0 && errors.As(err, &sc) {
		status = sc.HTTPStatusCode()
	}
	var oe *net.OpError
	var dns *net.DNSError
	var ue *url.Error
	switch {
	case errors.Is(err, bearer.ErrWait) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return &provider.Error{Kind: provider.KindTimeout, Msg: "no credential from the " + cloudName + " credential source within timeouts.open", Err: err}
	case ctx.Err() != nil:
		return provider.TransportError(ctx, ctx.Err())
	case status >= 500:
		return &provider.Error{Kind: provider.KindTransport, Msg: "the " + cloudName + " credential source failed: " + Clean(err.Error()), Err: err}
	case status == 0 && (errors.As(err, &oe) || errors.As(err, &dns) || errors.As(err, &ue)):
		// Not any net.Error: a missing key file (*fs.PathError) has
		// Timeout() too, and is a bad credential, not a network failure.
		return &provider.Error{Kind: provider.KindTransport, Msg: "cannot reach the " + cloudName + " credential source", Err: err}
	}
	if reason == "" {
		reason = err.Error()
	}
	return AuthFailed(name, cloudName, reason)
}
