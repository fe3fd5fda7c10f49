package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Kind classifies a failed attempt.
type Kind int

const (
	// KindHTTP: the upstream answered with a non-2xx status.
	KindHTTP Kind = iota
	// KindTransport: the connection failed, reset or closed early.
	KindTransport
	// KindTimeout: a deadline of ours passed while waiting on the upstream.
	KindTimeout
	// KindCanceled: the client went away; not the provider's fault.
	KindCanceled
	// KindBadResponse: a 2xx answer that is not what the protocol promises
	// (HTML instead of JSON, a broken SSE line).
	KindBadResponse
	// KindStaleConn: a pooled connection failed with EOF before any response
	// byte; cheap to retry at once.
	KindStaleConn
	// KindRefused: the gateway's own admission refused the attempt before
	// it was sent (rate limit, budget, concurrency).
	KindRefused
)

func (k Kind) String() string {
	switch k {
	case KindHTTP:
		return "http"
	case KindTransport:
		return "transport"
	case KindTimeout:
		return "timeout"
	case KindCanceled:
		return "canceled"
	case KindBadResponse:
		return "bad_response"
	case KindStaleConn:
		return "stale_connection"
	case KindRefused:
		return "refused"
	}
	return "unknown"
}

// MaxErrorBody bounds how much of an upstream error body is kept.
const MaxErrorBody = 64 << 10

// Error is a failed attempt. The attempt loop matches it with errors.As.
type Error struct {
	Kind   Kind
	Status int // upstream HTTP status, 0 when none was received
	// Header and Body are the upstream's error answer (Body bounded by
	// MaxErrorBody), relayed to the client when this is the final failure.
	Header http.Header
	Body   []byte
	// Msg is a short human reason, never containing secrets.
	Msg string
	Err error
	// KeyIndex is the provider key the attempt used, so that a quota
	// answer pauses that key only.
	KeyIndex int
}

func (e *Error) Error() string {
	switch {
	case e.Status != 0 && e.Msg != "":
		return fmt.Sprintf("status %d: %s", e.Status, e.Msg)
	case e.Status != 0:
		return fmt.Sprintf("status %d", e.Status)
	case e.Msg != "":
		return e.Kind.String() + ": " + e.Msg
	case e.Err != nil:
		return e.Kind.String() + ": " + e.Err.Error()
	}
	return e.Kind.String()
}

func (e *Error) Unwrap() error { return e.Err }

// StatusError builds the error for a non-2xx upstream answer.
func StatusError(status int, h http.Header, body []byte) *Error {
	return &Error{Kind: KindHTTP, Status: status, Header: h, Body: body, Msg: http.StatusText(status)}
}

// TransportError classifies err from an http.Client call: a context
// cancellation by the client, a deadline, or a connection failure.
func TransportError(ctx context.Context, err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	switch {
	case ctx.Err() == context.Canceled || errors.Is(err, context.Canceled):
		return &Error{Kind: KindCanceled, Msg: "request canceled", Err: err}
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return &Error{Kind: KindTimeout, Msg: "upstream timeout", Err: err}
	}
	return &Error{Kind: KindTransport, Msg: "connection failed", Err: err}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// Retryable reports whether the same provider may be tried again: transport
// failures, timeouts, 408, 500, 502, 503, 504 and 529.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindTransport, KindTimeout, KindStaleConn, KindBadResponse:
		return true
	case KindHTTP:
		switch e.Status {
		case 408, 500, 502, 503, 504, 529:
			return true
		}
	}
	return false
}
