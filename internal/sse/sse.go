// Package sse reads and writes server-sent events. It is the one SSE parser
// of the gateway: relays, translators and trackers all read through it, so
// line endings, comments and size limits are handled in one place.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
)

// MaxEventSize bounds one event so that a broken upstream cannot make the
// gateway buffer without limit.
const MaxEventSize = 8 << 20

// ErrTooLong is returned for an event larger than MaxEventSize.
var ErrTooLong = errors.New("sse: event too long")

// Event is one parsed event.
type Event struct {
	// Raw is the event exactly as received, blank line included, so that a
	// relay can forward it byte for byte.
	Raw []byte
	// Name is the `event:` field ("" when absent).
	Name string
	// Data is the `data:` lines joined with "\n".
	Data []byte
	// Comments holds comment lines (": ...") without the colon; vLLM sends
	// timing in them.
	Comments [][]byte
}

// Done reports whether this is OpenAI's terminal `data: [DONE]`.
func (e *Event) Done() bool { return bytes.Equal(e.Data, doneData) }

var doneData = []byte("[DONE]")

// Reader reads events from a stream.
type Reader struct {
	br  *bufio.Reader
	raw []byte
}

// NewReader reads events from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 16<<10)}
}

// Next returns the next event. Slices in the event are valid until the next
// call. At a clean end of stream it returns io.EOF; a stream cut inside an
// event returns the partial event's bytes with io.ErrUnexpectedEOF.
func (r *Reader) Next() (Event, error) {
	r.raw = r.raw[:0]
	var ev Event
	var data []byte
	haveData := false
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF {
				if len(r.raw) == 0 {
					return ev, io.EOF
				}
				// A final event without its blank line: deliver it, since
				// many servers end the stream right after the last data line.
				if haveData || ev.Name != "" || len(ev.Comments) > 0 {
					ev.Raw, ev.Data = r.raw, data
					return ev, nil
				}
				ev.Raw = r.raw
				return ev, io.ErrUnexpectedEOF
			}
			ev.Raw = r.raw
			return ev, err
		}
		if len(line) == 0 {
			if !haveData && ev.Name == "" && len(ev.Comments) == 0 {
				// Stray blank lines between events: skip, but keep the
				// relay byte-exact by not reporting an empty event.
				r.raw = r.raw[:0]
				continue
			}
			ev.Raw, ev.Data = r.raw, data
			return ev, nil
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "":
			ev.Comments = append(ev.Comments, value)
		case "data":
			if haveData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			haveData = true
		case "event":
			ev.Name = string(value)
		}
	}
}

// readLine appends the next line (with its ending) to r.raw and returns it
// without the ending. CR, LF and CRLF all end a line.
func (r *Reader) readLine() ([]byte, error) {
	start := len(r.raw)
	for {
		b, err := r.br.ReadByte()
		if err != nil {
			if err == io.EOF && len(r.raw) > start {
				return r.raw[start:], nil
			}
			return nil, err
		}
		switch b {
		case '\n':
			r.raw = append(r.raw, b)
			return r.raw[start : len(r.raw)-1], nil
		case '\r':
			r.raw = append(r.raw, b)
			line := r.raw[start : len(r.raw)-1]
			if nb, err := r.br.Peek(1); err == nil && nb[0] == '\n' {
				_, _ = r.br.ReadByte()
				r.raw = append(r.raw, '\n')
			}
			return line, nil
		}
		r.raw = append(r.raw, b)
		if len(r.raw) > MaxEventSize {
			return nil, ErrTooLong
		}
		// Copy the rest of a long line in one step instead of byte by byte.
		if chunk, _ := r.br.Peek(r.br.Buffered()); len(chunk) > 0 {
			if i := bytes.IndexAny(chunk, "\r\n"); i > 0 {
				r.raw = append(r.raw, chunk[:i]...)
				_, _ = r.br.Discard(i)
			} else if i < 0 {
				r.raw = append(r.raw, chunk...)
				_, _ = r.br.Discard(len(chunk))
			}
			if len(r.raw) > MaxEventSize {
				return nil, ErrTooLong
			}
		}
	}
}

// Writer writes events to a client and flushes after each one, so that no
// event waits in a buffer.
type Writer struct {
	w io.Writer
	f http.Flusher
}

// NewWriter writes to w, flushing when w supports it.
func NewWriter(w io.Writer) *Writer {
	f, _ := w.(http.Flusher)
	return &Writer{w: w, f: f}
}

// Raw writes bytes that already form whole events.
func (w *Writer) Raw(b []byte) error {
	if _, err := w.w.Write(b); err != nil {
		return err
	}
	w.Flush()
	return nil
}

// Data writes one `data:` event. data must not contain newlines (compact JSON).
func (w *Writer) Data(data []byte) error { return w.Event("", data) }

// Event writes one event with an optional name.
func (w *Writer) Event(name string, data []byte) error {
	buf := make([]byte, 0, len(name)+len(data)+16)
	if name != "" {
		buf = append(buf, "event: "...)
		buf = append(buf, name...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	return w.Raw(buf)
}

// Done writes OpenAI's terminal `data: [DONE]`.
func (w *Writer) Done() error { return w.Raw([]byte("data: [DONE]\n\n")) }

// Flush pushes buffered bytes to the client.
func (w *Writer) Flush() {
	if w.f != nil {
		w.f.Flush()
	}
}
