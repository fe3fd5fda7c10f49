package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

type got struct {
	name, data string
	comments   int
}

func readAll(t *testing.T, in string) ([]got, string, error) {
	t.Helper()
	r := NewReader(strings.NewReader(in))
	var out []got
	var raw bytes.Buffer
	for {
		ev, err := r.Next()
		raw.Write(ev.Raw)
		if err != nil {
			if err == io.EOF {
				return out, raw.String(), nil
			}
			return out, raw.String(), err
		}
		out = append(out, got{ev.Name, string(ev.Data), len(ev.Comments)})
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []got
		wantErr error
	}{
		{"openai chunks", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []got{{"", `{"a":1}`, 0}, {"", "[DONE]", 0}}, nil},
		{"named events", "event: message_start\ndata: {}\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n", []got{{"message_start", "{}", 0}, {"ping", `{"type":"ping"}`, 0}}, nil},
		{"crlf and cr", "data: x\r\n\r\ndata: y\r\rdata: z\n\n", []got{{"", "x", 0}, {"", "y", 0}, {"", "z", 0}}, nil},
		{"multi-line data", "data: a\ndata: b\n\n", []got{{"", "a\nb", 0}}, nil},
		{"no space after colon", "data:{}\n\n", []got{{"", "{}", 0}}, nil},
		{"comment event", ": energy {\"duration_seconds\":1.5}\n\n", []got{{"", "", 1}}, nil},
		{"stray blank lines", "\n\ndata: a\n\n\n\ndata: b\n\n", []got{{"", "a", 0}, {"", "b", 0}}, nil},
		{"last event without blank line", "data: a\n\ndata: b\n", []got{{"", "a", 0}, {"", "b", 0}}, nil},
		{"last event without newline", "data: a", []got{{"", "a", 0}}, nil},
		{"ignored fields", "id: 7\nretry: 10\ndata: a\n\n", []got{{"", "a", 0}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, raw, err := readAll(t, tc.in)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if len(out) != len(tc.want) {
				t.Fatalf("events = %+v, want %+v", out, tc.want)
			}
			for i := range out {
				if out[i] != tc.want[i] {
					t.Errorf("event %d = %+v, want %+v", i, out[i], tc.want[i])
				}
			}
			// Raw bytes of all events reassemble the stream (stray blank
			// lines between events aside): relays forward byte for byte.
			if strings.ReplaceAll(raw, "\n", "") != strings.ReplaceAll(tc.in, "\n", "") {
				t.Errorf("raw = %q, want the input's bytes %q", raw, tc.in)
			}
		})
	}
}

func TestReaderTooLong(t *testing.T) {
	in := "data: " + strings.Repeat("x", MaxEventSize+10) + "\n\n"
	_, _, err := readAll(t, in)
	if !errors.Is(err, ErrTooLong) {
		t.Fatalf("err = %v, want ErrTooLong", err)
	}
}

func TestWriterFlushesEachEvent(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	if err := w.Event("ping", []byte(`{"type":"ping"}`)); err != nil {
		t.Fatal(err)
	}
	if !rec.Flushed {
		t.Fatal("event was not flushed")
	}
	_ = w.Data([]byte(`{}`))
	_ = w.Done()
	want := "event: ping\ndata: {\"type\":\"ping\"}\n\ndata: {}\n\ndata: [DONE]\n\n"
	if rec.Body.String() != want {
		t.Fatalf("body = %q, want %q", rec.Body.String(), want)
	}
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{"data: {}\n\n", "event: a\r\ndata: b\r\n\r\n", ": c\n\n", "data", "\r\r\n\n", "data: [DONE]\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b))
		total := 0
		for i := 0; i < len(b)+2; i++ {
			ev, err := r.Next()
			total += len(ev.Raw)
			if err != nil {
				break
			}
		}
		if total > len(b) {
			t.Fatalf("read %d raw bytes from %d input bytes", total, len(b))
		}
	})
}

// chunks yields one chunk per Read, like a body whose writes arrive apart.
type chunks []string

func (c *chunks) Read(p []byte) (int, error) {
	if len(*c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*c)[0])
	(*c)[0] = (*c)[0][n:]
	if (*c)[0] == "" {
		*c = (*c)[1:]
	}
	return n, nil
}

// The hook runs before every read of the source and never between events
// that arrived together: a relay flushing there sends a burst in one write
// and holds nothing while it waits.
func TestBeforeReadRunsOnlyBeforeReads(t *testing.T) {
	src := chunks{"data: a\n\ndata: b\n\n", "data: c\n\n"}
	r := NewReader(&src)
	hooks := 0
	r.BeforeRead(func() { hooks++ })
	want := []struct {
		data  string
		hooks int // hook runs seen once the event is returned
	}{{"a", 1}, {"b", 1}, {"c", 2}}
	for _, w := range want {
		ev, err := r.Next()
		if err != nil || string(ev.Data) != w.data || hooks != w.hooks {
			t.Fatalf("event %q (err %v) after %d hook runs; want %q after %d", ev.Data, err, hooks, w.data, w.hooks)
		}
	}
	if _, err := r.Next(); err != io.EOF || hooks != 3 {
		t.Fatalf("end: %v after %d hook runs, want EOF after 3", err, hooks)
	}
}

// Every writer frames events through AppendFrame; what it frames reads
// back as the same event, named or not, after whatever b already held.
func TestAppendFrameReadsBack(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"", `{"a":1}`, "data: {\"a\":1}\n\n"},
		{"message_stop", `{"type":"message_stop"}`, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
		{"", "", "data: \n\n"},
	} {
		prefix := []byte("data: [held]\n\n")
		got := AppendFrame(append([]byte(nil), prefix...), tc.name, []byte(tc.data))
		if string(got) != string(prefix)+tc.want {
			t.Errorf("AppendFrame(%q, %q) = %q, want %q after the prefix", tc.name, tc.data, got, tc.want)
		}
		if f := Frame(tc.name, []byte(tc.data)); string(f) != tc.want {
			t.Errorf("Frame(%q, %q) = %q, want %q", tc.name, tc.data, f, tc.want)
		}
		r := NewReader(strings.NewReader(string(got)))
		if ev, err := r.Next(); err != nil || string(ev.Data) != "[held]" {
			t.Fatalf("the prefix read back as %q, %v", ev.Data, err)
		}
		ev, err := r.Next()
		if err != nil || ev.Name != tc.name || string(ev.Data) != tc.data {
			t.Errorf("%q read back as name %q data %q, %v", tc.want, ev.Name, ev.Data, err)
		}
	}
}
