package cloud

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"testing"

	"switchboard/internal/provider"
	"switchboard/internal/provider/bearer"
)

type httpStatus int

func (h httpStatus) Error() string       { return fmt.Sprintf("operation failed: %d", int(h)) }
func (h httpStatus) HTTPStatusCode() int { return int(h) }

func TestCredentialError(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		status int
		err    error
		kind   provider.Kind
		code   int
	}{
		{"no token within the bound", context.Background(), 0, bearer.ErrWait, provider.KindTimeout, 0},
		{"the fetch's own deadline", context.Background(), 0, fmt.Errorf("fetch: %w", context.DeadlineExceeded), provider.KindTimeout, 0},
		{"client gone", canceled, 0, context.Canceled, provider.KindCanceled, 0},
		{"issuer 5xx", context.Background(), 503, errors.New("unavailable"), provider.KindTransport, 0},
		{"issuer unreachable", context.Background(), 0, &url.Error{Op: "Post", URL: "https://sts", Err: errors.New("connection refused")}, provider.KindTransport, 0},
		{"issuer refused (status from the error)", context.Background(), 0, httpStatus(403), provider.KindHTTP, 401},
		{"missing key file is a bad credential", context.Background(), 0, &fs.PathError{Op: "open", Path: "/sa.json", Err: fs.ErrNotExist}, provider.KindHTTP, 401},
		{"invalid grant", context.Background(), 400, errors.New("invalid_grant"), provider.KindHTTP, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := CredentialError(tt.ctx, "p", "Cloud", tt.status, "", tt.err)
			if e.Kind != tt.kind || e.Status != tt.code {
				t.Fatalf("kind %v status %d, want %v %d (%v)", e.Kind, e.Status, tt.kind, tt.code, e)
			}
			if e.Kind == provider.KindHTTP && (e.Retryable() || !strings.Contains(string(e.Body), CodeCredentials)) {
				t.Fatalf("a bad credential: %v %s", e.Retryable(), e.Body)
			}
		})
	}
}

func TestCleanReason(t *testing.T) {
	if got := Clean(" bad\nline\x1b[31m \xff"); strings.ContainsAny(got, "\n\x1b") || strings.ContainsRune(got, '\ufffd') {
		t.Fatalf("%q", got)
	}
	if got := Clean(strings.Repeat("x", 1000)); len(got) != maxReason+3 {
		t.Fatalf("%d bytes", len(got))
	}
	if got := Reason([]byte(`{"error":{"message":"Access denied"}}`)); got != "Access denied" {
		t.Fatal(got)
	}
	if got := Reason([]byte(`{"message":"The security token included in the request is invalid."}`)); !strings.HasPrefix(got, "The security token") {
		t.Fatal(got)
	}
}
