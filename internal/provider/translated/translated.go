// Package translated holds what the providers that translate another
// protocol into OpenAI's (anthropic, gemini) share: opening a translated
// stream so an early upstream error still fails the attempt, classifying
// translation failures, and the headers of a translated answer.
package translated

import (
	"context"
	"errors"
	"net/http"

	"switchboard/internal/provider"
	"switchboard/internal/sse"
	"switchboard/internal/translate"
)

// OpenStream reads the upstream until the first translated bytes, so that
// an error the upstream sends as its first event (overloaded, a safety
// block) fails the attempt while failing over is still possible.
func OpenStream(ctx context.Context, resp *http.Response, r *translate.Reader) (*provider.Response, error) {
	if err := r.Prime(); err != nil {
		r.Close()
		return nil, StreamError(ctx, resp, err)
	}
	return &provider.Response{Status: resp.StatusCode, Header: AnswerHeader(resp.Header, "text/event-stream"), Body: r, Stream: true}, nil
}

// StreamError classifies a failure seen while translating an answer: an
// error the upstream reported inside a 200, a malformed answer, or a
// transport failure.
func StreamError(ctx context.Context, resp *http.Response, err error) error {
	var ue *translate.UpstreamError
	var pe *translate.ProtocolError
	switch {
	case errors.As(err, &ue):
		return provider.StatusError(ue.Status, resp.Header, ue.Body)
	case errors.As(err, &pe), errors.Is(err, sse.ErrTooLong):
		return BadResponse(resp.StatusCode, err.Error())
	}
	return provider.TransportError(ctx, err)
}

// AnswerHeader is the upstream's header for a translated body: rate-limit
// and request-id headers stay, the body's own description goes.
func AnswerHeader(h http.Header, ct string) http.Header {
	out := h.Clone()
	out.Del("Content-Length")
	out.Del("Content-Encoding")
	out.Set("Content-Type", ct)
	return out
}

// BadResponse is a 2xx answer that is not what the protocol promises.
func BadResponse(status int, msg string) *provider.Error {
	return &provider.Error{Kind: provider.KindBadResponse, Status: status, Msg: msg}
}
