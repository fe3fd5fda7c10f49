package proxy

import (
	"errors"
	"syscall"

	"switchboard/internal/health"
	"switchboard/internal/provider"
)

var (
	errDeadline    = errors.New("request deadline passed")
	errTTFT        = errors.New("no first token within the ttft timeout")
	errFirstByte   = errors.New("no response within the first_byte timeout")
	errEmptyAnswer = errors.New("stream finished without any content")
	errEmptyStream = errors.New("stream ended before the first token")
	errStreamError = errors.New("error event before the first token")
)

// Reason labels a failed attempt for logs, metrics and the client's
// failure detail: quota_exhausted, rate_limited, client_error,
// server_error, timeout, ttft_timeout, first_byte_timeout, empty_answer, deadline, client_disconnect,
// upstream_disconnect, connection_reset, stream_error, bad_response, error.
func Reason(e *provider.Error) string {
	switch {
	case errors.Is(e.Err, errDeadline):
		return "deadline"
	case errors.Is(e.Err, errTTFT):
		return "ttft_timeout"
	case errors.Is(e.Err, errFirstByte):
		return "first_byte_timeout"
	case errors.Is(e.Err, errEmptyAnswer):
		return "empty_answer"
	case errors.Is(e.Err, errEmptyStream):
		return "upstream_disconnect"
	case errors.Is(e.Err, errStreamError):
		return "stream_error"
	}
	switch e.Kind {
	case provider.KindHTTP:
		if q, ok := health.Quota(e.Status, e.Body); ok {
			if q == health.ReasonRateLimited {
				return "rate_limited"
			}
			return "quota_exhausted"
		}
		if e.Status >= 500 {
			return "server_error"
		}
		return "client_error"
	case provider.KindTimeout:
		return "timeout"
	case provider.KindCanceled:
		return "client_disconnect"
	case provider.KindStaleConn:
		return "upstream_disconnect"
	case provider.KindBadResponse:
		return "bad_response"
	case provider.KindTransport:
		if errors.Is(e.Err, syscall.ECONNRESET) {
			return "connection_reset"
		}
		return "error"
	}
	return "error"
}

// credentialRefused reports an upstream 401, or a 403 that is not a
// quota answer: the provider refused the gateway's credential for it.
func credentialRefused(e *provider.Error) bool {
	if e.Kind != provider.KindHTTP || e.Status != 401 && e.Status != 403 {
		return false
	}
	_, quota := health.Quota(e.Status, e.Body)
	return !quota
}
