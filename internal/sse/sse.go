// Package sse reads and writes server-sent events. It is the one SSE parser
// of the gateway: relays, translators and trackers all read through it, so
// line endings, comments and size limits are handled in one place.
package sse

import (
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

// Clone copies the event out of the reader's scratch space, so that it
// outlives the next call to Next.
func (e *Event) Clone() Event {
	c := Event{Name: e.Name, Raw: append([]byte(nil), e.Raw...)}
	if e.Data != nil {
		c.Data = append([]byte(nil), e.Data...)
	}
	for _, x := range e.Comments {
		c.Comments = append(c.Comments, append([]byte(nil), x...))
	}
	return c
}

// Done reports whether this is OpenAI's terminal `data: [DONE]`.
func (e *Event) Done() bool { return bytes.Equal(e.Data, doneData) }

var doneData = []byte("[DONE]")

// Reader reads events from a stream. It scans lines in bulk over its own
// buffer and reuses its scratch space, so relaying an event costs a few
// copies and no allocation.
type Reader struct {
	src  io.Reader
	buf  []byte
	r, w int // unread bytes are buf[r:w]
	err  error
	raw  []byte
	data []byte
	com  [][]byte
	// beforeFill runs before every read of the source (see BeforeRead).
	beforeFill func()
}

// BeforeRead sets f to run before each read of the source, that is before
// the reader may wait for bytes. A relay flushes there: events that
// arrived together leave in one write, and none waits in a buffer while
// the reader waits for the next.
func (r *Reader) BeforeRead(f func()) { r.beforeFill = f }

// readSize is the read buffer: big enough for typical chunks, small enough
// to hold thousands of streams.
const readSize = 1 << 10

// NewReader reads events from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{src: r, buf: make([]byte, readSize)}
}

// Next returns the next event. Slices in the event are valid until the next
// call. At a clean end of stream it returns io.EOF; a stream cut inside an
// event returns the partial event's bytes with io.ErrUnexpectedEOF.
func (r *Reader) Next() (Event, error) {
	r.raw, r.data, r.com = r.raw[:0], r.data[:0], r.com[:0]
	var ev Event
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
				if haveData || ev.Name != "" || len(r.com) > 0 {
					return r.event(ev, haveData), nil
				}
				ev.Raw = r.raw
				return ev, io.ErrUnexpectedEOF
			}
			ev.Raw = r.raw
			return ev, err
		}
		if len(line) == 0 {
			if !haveData && ev.Name == "" && len(r.com) == 0 {
				// Stray blank lines between events are skipped.
				r.raw = r.raw[:0]
				continue
			}
			return r.event(ev, haveData), nil
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
			r.com = append(r.com, value)
		case "data":
			if haveData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			haveData = true
		case "event":
			ev.Name = string(value)
		}
	}
}

func (r *Reader) event(ev Event, haveData bool) Event {
	ev.Raw = r.raw
	if haveData {
		ev.Data = r.data
	}
	if len(r.com) > 0 {
		ev.Comments = r.com
	}
	return ev
}

// readLine appends the next line (with its ending) to r.raw and returns it
// without the ending. CR, LF and CRLF all end a line. The returned slice
// points into r.raw.
func (r *Reader) readLine() ([]byte, error) {
	scanned := 0 // leading bytes of buf[r.r:r.w] known to hold no line end
	for {
		if i := lineEnd(r.buf[r.r+scanned : r.w]); i >= 0 {
			end := r.r + scanned + i
			n := 1
			if r.buf[end] == '\r' {
				if end+1 == r.w && r.err == nil {
					// Whether LF follows the CR is in the next read.
					scanned = end - r.r
					_ = r.fill()
					continue
				}
				if end+1 < r.w && r.buf[end+1] == '\n' {
					n = 2
				}
			}
			start := len(r.raw)
			r.raw = append(r.raw, r.buf[r.r:end+n]...)
			r.r = end + n
			if len(r.raw) > MaxEventSize {
				return nil, ErrTooLong
			}
			return r.raw[start : len(r.raw)-n], nil
		}
		scanned = r.w - r.r
		if len(r.raw)+scanned > MaxEventSize {
			return nil, ErrTooLong
		}
		if err := r.fill(); err != nil {
			if err == io.EOF && r.w > r.r {
				// A last line without its ending.
				start := len(r.raw)
				r.raw = append(r.raw, r.buf[r.r:r.w]...)
				r.r = r.w
				return r.raw[start:], nil
			}
			return nil, err
		}
	}
}

// lineEnd finds the first CR or LF. Two vectorised byte searches beat one
// scan for either byte, and CR is rare.
func lineEnd(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	limit := b
	if n >= 0 {
		limit = b[:n]
	}
	if c := bytes.IndexByte(limit, '\r'); c >= 0 {
		return c
	}
	return n
}

// fill reads more bytes into the buffer, keeping unread ones.
func (r *Reader) fill() error {
	if r.err != nil {
		return r.err
	}
	if r.beforeFill != nil {
		r.beforeFill()
	}
	if r.r > 0 {
		n := copy(r.buf, r.buf[r.r:r.w])
		r.r, r.w = 0, n
	}
	if r.w == len(r.buf) {
		nb := make([]byte, 2*len(r.buf))
		copy(nb, r.buf[:r.w])
		r.buf = nb
	}
	for tries := 0; tries < 100; tries++ {
		n, err := r.src.Read(r.buf[r.w:])
		r.w += n
		if err != nil {
			r.err = err
		}
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	r.err = io.ErrNoProgress
	return r.err
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

// Write writes bytes that form whole events without flushing; Flush
// sends them.
func (w *Writer) Write(b []byte) error {
	_, err := w.w.Write(b)
	return err
}

// Raw writes bytes that already form whole events, and flushes.
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
func (w *Writer) Event(name string, data []byte) error { return w.Raw(Frame(name, data)) }

// Frame is data framed as one event named name ("" = unnamed). data must
// not contain newlines (compact JSON).
func Frame(name string, data []byte) []byte {
	return AppendFrame(make([]byte, 0, len(name)+len(data)+16), name, data)
}

// AppendFrame appends data framed as one event named name to b: the one
// place events are framed.
func AppendFrame(b []byte, name string, data []byte) []byte {
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// Done writes OpenAI's terminal `data: [DONE]`.
func (w *Writer) Done() error { return w.Raw([]byte("data: [DONE]\n\n")) }

// Flush pushes buffered bytes to the client.
func (w *Writer) Flush() {
	if w.f != nil {
		w.f.Flush()
	}
}
