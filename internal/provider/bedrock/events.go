package bedrock

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"

	"switchboard/internal/sse"
	"switchboard/internal/translate"
)

// maxMessage bounds one message of an AWS event stream (as the SSE reader
// bounds an event): the decoder itself would take a declared length of up
// to 4 GiB.
const maxMessage = sse.MaxEventSize

// events reads Bedrock's binary event stream (application/vnd.amazon.
// eventstream) as events named by their :event-type:
//
//   - ConverseStream: messageStart, contentBlockDelta, ... with the
//     member's JSON as data; an exception is an event named by its
//     :exception-type (throttlingException, ...), its {"message"} as data;
//   - InvokeModelWithResponseStream (invoke): each chunk's bytes, an
//     Anthropic stream event, named by its type; an exception becomes
//     Anthropic's error event, so that a native client sees one.
type events struct {
	r      *bufio.Reader
	dec    *eventstream.Decoder
	buf    []byte
	invoke bool
}

func newEvents(body io.Reader, invoke bool) *events {
	return &events{r: bufio.NewReaderSize(body, 16<<10), dec: eventstream.NewDecoder(), invoke: invoke}
}

var errTooLarge = &translate.ProtocolError{Msg: "event stream message larger than 8 MiB"}

// Next implements translate.Events.
func (e *events) Next() (sse.Event, error) {
	for {
		prelude, err := e.r.Peek(4)
		switch {
		case err == io.EOF && len(prelude) == 0:
			return sse.Event{}, io.EOF
		case err == io.EOF:
			return sse.Event{}, io.ErrUnexpectedEOF
		case err != nil:
			return sse.Event{}, err
		case binary.BigEndian.Uint32(prelude) > maxMessage:
			return sse.Event{}, errTooLarge
		}
		m, err := e.dec.Decode(e.r, e.buf[:0])
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return sse.Event{}, io.ErrUnexpectedEOF
			}
			return sse.Event{}, &translate.ProtocolError{Msg: "event stream: " + err.Error()}
		}
		e.buf = m.Payload[:0]
		switch header(m, ":message-type") {
		case "event":
			ev, ok, err := e.event(header(m, ":event-type"), m.Payload)
			if err != nil || ok {
				return ev, err
			}
		case "exception":
			return e.failure(header(m, ":exception-type"), gjson.GetBytes(m.Payload, "message").String()), nil
		case "error":
			return e.failure(header(m, ":error-code"), header(m, ":error-message")), nil
		}
		// Anything else (an initial-response, a new message type) is
		// skipped.
	}
}

func header(m eventstream.Message, name string) string {
	if v := m.Headers.Get(name); v != nil {
		return v.String()
	}
	return ""
}

// event turns one event message into an event; ok is false for one to
// skip.
func (e *events) event(name string, payload []byte) (sse.Event, bool, error) {
	if !e.invoke {
		return sse.Event{Name: name, Data: payload}, true, nil
	}
	if name != "chunk" {
		return sse.Event{}, false, nil
	}
	b := gjson.GetBytes(payload, "bytes")
	data, err := base64.StdEncoding.DecodeString(b.String())
	if b.Type != gjson.String || err != nil {
		return sse.Event{}, false, &translate.ProtocolError{Msg: "invoke stream chunk without base64 bytes"}
	}
	typ := gjson.GetBytes(data, "type")
	if typ.Type != gjson.String || typ.Str == "" {
		return sse.Event{}, false, &translate.ProtocolError{Msg: "invoke stream chunk is not an Anthropic event"}
	}
	return sse.Event{Name: typ.Str, Data: data}, true, nil
}

// anthropicError names Bedrock's stream exceptions in Anthropic's error
// vocabulary.
var anthropicError = map[string]string{
	"throttlingException": "rate_limit_error", "serviceQuotaExceededException": "rate_limit_error",
	"serviceUnavailableException": "overloaded_error", "modelNotReadyException": "overloaded_error",
	"modelTimeoutException": "timeout_error", "validationException": "invalid_request_error",
	"accessDeniedException": "permission_error",
}

// failure is an exception (or an error message) as an event.
func (e *events) failure(typ, msg string) sse.Event {
	if typ == "" {
		typ = "internalServerException"
	}
	typ = strings.ToLower(typ[:1]) + typ[1:]
	if msg == "" {
		msg = "bedrock stream failed: " + typ
	}
	if !e.invoke {
		return sse.Event{Name: typ, Data: fmt.Appendf(nil, `{"message":%s}`, quote(msg))}
	}
	at, ok := anthropicError[typ]
	if !ok {
		at = "api_error"
	}
	return sse.Event{Name: "error", Data: fmt.Appendf(nil, `{"type":"error","error":{"type":%s,"message":%s}}`, quote(at), quote(msg))}
}

// quote is s as a JSON string.
func quote(s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}

// sseBody is an event source written out as an SSE stream, for a client
// that reads one (an Anthropic client of InvokeModelWithResponseStream).
type sseBody struct {
	src     *events
	body    io.Closer
	pending []byte
	err     error
}

func (s *sseBody) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		ev, err := s.src.Next()
		if err != nil {
			s.err = err
			continue
		}
		s.pending = append(s.pending[:0], "event: "...)
		s.pending = append(s.pending, ev.Name...)
		s.pending = append(s.pending, "\ndata: "...)
		s.pending = append(s.pending, ev.Data...)
		s.pending = append(s.pending, "\n\n"...)
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

func (s *sseBody) Close() error { return s.body.Close() }
