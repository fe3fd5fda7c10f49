package provider

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The read bound is per wait for bytes, not per answer: a stream whose
// events keep coming is never cut, one that falls silent is, no sooner
// than the bound.
func TestClientReadBound(t *testing.T) {
	const bound = 100 * time.Millisecond
	tests := []struct {
		name    string
		gaps    []time.Duration // pause before each event after the first
		wantCut bool
	}{
		{"steady events outlast the bound in total", []time.Duration{60 * time.Millisecond, 60 * time.Millisecond, 60 * time.Millisecond}, false},
		{"silence longer than the bound", []time.Duration{10 * time.Millisecond, 600 * time.Millisecond}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "data: 0\n\n")
				w.(http.Flusher).Flush()
				for _, g := range tt.gaps {
					select {
					case <-time.After(g):
					case <-done:
						return
					}
					_, _ = io.WriteString(w, "data: x\n\n")
					w.(http.Flusher).Flush()
				}
			}))
			defer up.Close()
			defer close(done)
			c := NewHTTPClient(ClientOptions{Open: time.Second, Read: bound, Write: time.Second})
			resp, err := c.Get(up.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 64)
			var last time.Time
			for {
				last = time.Now()
				_, err = resp.Body.Read(buf)
				if err != nil {
					break
				}
			}
			silent := time.Since(last)
			var ne net.Error
			cut := errors.As(err, &ne) && ne.Timeout()
			if cut != tt.wantCut {
				t.Fatalf("cut = %v (err %v), want %v", cut, err, tt.wantCut)
			}
			if cut && silent < bound {
				t.Errorf("cut after %v of silence, sooner than the %v bound", silent, bound)
			}
			if !cut && err != io.EOF {
				t.Errorf("err = %v, want EOF", err)
			}
		})
	}
}
