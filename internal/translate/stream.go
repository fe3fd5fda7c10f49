package translate

import (
	"errors"
	"io"
	"sync/atomic"

	"switchboard/internal/sse"
)

// StreamTranslator turns an upstream event stream into OpenAI chunk
// payloads (the JSON after "data: "). Implementations are single-use.
type StreamTranslator interface {
	// Event translates one upstream event. done reports the upstream's
	// terminal event: nothing after it is read. An *UpstreamError reports
	// an error the upstream sent in the stream.
	Event(name string, data []byte) (out [][]byte, done bool, err error)
	// End is called when the upstream closed without a terminal event; it
	// returns the last payloads for protocols that end by closing, or an
	// error for a stream cut short.
	End() ([][]byte, error)
	// Usage is the token count seen so far.
	Usage() Usage
}

var doneEvent = []byte("data: [DONE]\n\n")

// Events is a source of upstream events, read one at a time: an SSE
// stream (sse.Reader), or a binary one decoded into events (Bedrock's AWS
// event stream).
type Events interface {
	Next() (sse.Event, error)
}

// Reader is a pull-based translating stream: each Read pulls upstream
// events through the one SSE parser only as far as needed to return bytes,
// so nothing is buffered beyond one event and no goroutine is involved.
// It yields OpenAI `data: {chunk}` events ending with `data: [DONE]`.
// Closing it closes the upstream body; a canceled request context ends the
// upstream read with an error.
type Reader struct {
	body    io.ReadCloser
	events  Events
	t       StreamTranslator
	pending []byte
	err     error // returned once pending is drained
	emitted bool  // bytes were produced: errors can no longer be replaced
	chunks  int   // payloads translated so far
	closed  atomic.Bool
}

// NewReader translates the SSE stream body with t.
func NewReader(body io.ReadCloser, t StreamTranslator) *Reader {
	return NewEventReader(body, sse.NewReader(body), t)
}

// NewEventReader translates the events read from body by events with t;
// closing the reader closes body.
func NewEventReader(body io.ReadCloser, events Events, t StreamTranslator) *Reader {
	return &Reader{body: body, events: events, t: t}
}

// Prime reads until the first content is translated: past the opening
// chunk (the role) to the first chunk after it. It returns the upstream's
// error when the stream opens with one (an *UpstreamError, e.g. an
// overloaded error event right after message_start, or a blocked prompt),
// so that the caller can still fail over before anything reached the
// client.
func (r *Reader) Prime() error {
	for r.chunks < 2 && r.err == nil {
		r.step()
	}
	// Nothing has reached the client yet: any failure so far fails the
	// attempt, which the caller may retry.
	if r.err != nil && r.err != io.EOF {
		return r.err
	}
	return nil
}

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			if r.closed.Load() {
				return 0, io.ErrClosedPipe
			}
			var ue *UpstreamError
			if errors.As(r.err, &ue) {
				return 0, io.EOF // reported to the client as an error event
			}
			return 0, r.err
		}
		r.step()
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	if n > 0 {
		r.emitted = true
	}
	return n, nil
}

// Close closes the upstream body.
func (r *Reader) Close() error {
	r.closed.Store(true)
	return r.body.Close()
}

// Usage is the token count seen so far (final once Read returned io.EOF).
func (r *Reader) Usage() Usage { return r.t.Usage() }

// step pulls one upstream event and appends its translation to pending.
func (r *Reader) step() {
	ev, err := r.events.Next()
	if err != nil {
		if err == io.EOF {
			out, endErr := r.t.End()
			r.emit(out)
			if endErr != nil {
				r.err = endErr
				return
			}
			r.pending = append(r.pending, doneEvent...)
			r.err = io.EOF
			return
		}
		if err == io.ErrUnexpectedEOF {
			err = &ProtocolError{Msg: "stream cut inside an event"}
		}
		r.err = err
		return
	}
	if len(ev.Data) == 0 && ev.Name == "" {
		return // comment-only event (keep-alive)
	}
	out, done, err := r.t.Event(ev.Name, ev.Data)
	r.emit(out)
	var ue *UpstreamError
	switch {
	case errors.As(err, &ue):
		// OpenAI reports a mid-stream failure as a data event carrying
		// the error object, then closes without [DONE].
		r.emit([][]byte{ue.Body})
		r.err = err
	case err != nil:
		r.err = err
	case done:
		r.pending = append(r.pending, doneEvent...)
		r.err = io.EOF
	}
}

func (r *Reader) emit(out [][]byte) {
	r.chunks += len(out)
	for _, d := range out {
		r.pending = sse.AppendFrame(r.pending, "", d)
	}
}
