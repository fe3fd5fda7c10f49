package provider

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The read bound is per wait for bytes, not per answer: a stream whose
// events keep coming is never cut, one that falls silent is, no sooner
// than the bound.
func TestClientReadBound(t *testing.T) {
	// Wide margins: a loaded 2-core machine delays a 60 ms timer past 100 ms.
	const bound = 400 * time.Millisecond
	tests := []struct {
		name    string
		gaps    []time.Duration // pause before each event after the first
		wantCut bool
	}{
		{"steady events outlast the bound in total", []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}, false},
		{"silence longer than the bound", []time.Duration{10 * time.Millisecond, 2 * time.Second}, true},
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

func TestReadAllSized(t *testing.T) {
	tests := []struct {
		name string
		body string
		size int64
	}{
		{"declared length", "hello world", 11},
		{"unknown length", "hello world", -1},
		{"empty", "", 0},
		{"longer than declared", "hello world", 4},
		{"shorter than declared", "hello", 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// iotest-like: one byte per Read, the hardest case for the loop.
			got, err := ReadAllSized(io.LimitReader(&oneByte{s: tt.body}, 1<<20), tt.size)
			if err != nil || string(got) != tt.body {
				t.Fatalf("got %q, %v; want %q", got, err, tt.body)
			}
		})
	}
}

type oneByte struct{ s string }

func (o *oneByte) Read(p []byte) (int, error) {
	if o.s == "" {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0], o.s = o.s[0], o.s[1:]
	return 1, nil
}

// A declared length is a claim: a body far smaller than declared reserves
// at most maxPrealloc, and one far larger is still read whole.
func TestReadAllSizedDoesNotTrustHugeLengths(t *testing.T) {
	got, err := ReadAllSized(io.LimitReader(&oneByte{s: "tiny"}, 1<<20), 10<<30)
	if err != nil || string(got) != "tiny" || cap(got) > maxPrealloc+1 {
		t.Fatalf("got %q (cap %d), %v", got, cap(got), err)
	}
	big := strings.Repeat("x", 3<<20)
	got, err = ReadAllSized(strings.NewReader(big), 3<<20)
	if err != nil || len(got) != len(big) {
		t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(big))
	}
}
