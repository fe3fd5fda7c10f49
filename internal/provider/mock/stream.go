package mock

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"switchboard/internal/provider"
	"switchboard/internal/sse"
)

// Stream endings that are not failures of the producer itself.
var (
	errCut     = errors.New("mock: stream cut")
	errGarbage = errors.New("mock: garbage sent")
)

// streamBody is the Body of a streamed answer. Close stops the producer at
// once, even while it waits on pacing, so nothing outlives the caller.
type streamBody struct {
	pr       *io.PipeReader
	done     chan struct{} // closed by Close
	once     sync.Once
	finished chan struct{} // closed when the producer goroutine has exited
}

func (b *streamBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *streamBody) Close() error {
	b.once.Do(func() {
		close(b.done)
		b.pr.Close()
	})
	return nil
}

// streamer produces one SSE answer into a pipe.
type streamer struct {
	j     *job
	ctx   context.Context
	done  <-chan struct{}
	w     *io.PipeWriter
	start time.Time
	sent  int // content chunks written
	seq   int // Responses API sequence_number
}

func (j *job) startStream(ctx context.Context) *provider.Response {
	pr, pw := io.Pipe()
	b := &streamBody{pr: pr, done: make(chan struct{}), finished: make(chan struct{})}
	s := &streamer{j: j, ctx: ctx, done: b.done, w: pw, start: time.Now()}
	go s.run(b.finished)
	h := j.respHeader("text/event-stream")
	h.Set("Cache-Control", "no-cache")
	return &provider.Response{Status: j.status, Header: h, Body: b, Stream: true}
}

func (s *streamer) run(finished chan<- struct{}) {
	defer close(finished)
	// A cancelled ctx must also unblock a Write the reader is not draining.
	stop := context.AfterFunc(s.ctx, func() { s.w.CloseWithError(s.ctx.Err()) })
	defer stop()

	err := s.wait(s.start.Add(s.j.ttft))
	if err == nil {
		switch {
		case s.j.raw != nil:
			err = s.write(s.j.raw)
		case s.j.garbage && s.j.cut <= 0:
			err = s.writeGarbage()
		case s.j.endpoint == provider.Chat:
			err = s.chat()
		case s.j.endpoint == provider.Completions:
			err = s.completions()
		default:
			err = s.responses()
		}
	}
	switch {
	case err == nil, errors.Is(err, errGarbage):
		s.w.Close()
	case errors.Is(err, errCut):
		s.w.CloseWithError(io.ErrUnexpectedEOF)
	case s.ctx.Err() != nil:
		s.w.CloseWithError(s.ctx.Err())
	default:
		s.w.CloseWithError(err)
	}
}

// wait sleeps until t unless the body is closed or ctx is done.
func (s *streamer) wait(t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	case <-s.done:
		return io.ErrClosedPipe
	}
}

func (s *streamer) write(b []byte) error {
	_, err := s.w.Write(b)
	return err
}

// frame writes one SSE event; event "" omits the event: line.
func (s *streamer) frame(event string, v any) error {
	data, err := jsonMarshal(v)
	if err != nil {
		return err
	}
	return s.write(sse.Frame(event, data))
}

// content writes the i-th token's event on its pacing schedule, then ends
// the stream if the fault says to cut here.
func (s *streamer) content(i int, event string, v any) error {
	if err := s.wait(s.start.Add(s.j.ttft + time.Duration(i-1)*s.j.gap)); err != nil {
		return err
	}
	if err := s.frame(event, v); err != nil {
		return err
	}
	s.sent++
	if s.j.cut > 0 && s.sent >= s.j.cut {
		if s.j.garbage {
			return s.writeGarbage()
		}
		return errCut
	}
	return nil
}

// writeGarbage sends an event whose JSON breaks off, as a misbehaving proxy
// might, and ends the stream.
func (s *streamer) writeGarbage() error {
	line := `data: {"id":"` + s.j.id() + `","object":"chat.completion.chunk","choices":[{"delta":{"content":"oo` + "\n\n"
	if s.j.endpoint == provider.Responses {
		line = "event: response.output_text.delta\n" + line
	}
	if err := s.write([]byte(line)); err != nil {
		return err
	}
	return errGarbage
}

func (s *streamer) chat() error {
	j := s.j
	var u any
	if j.usage {
		u = json.RawMessage("null")
	}
	chunk := func(d chatDelta, finish *string) chatChunk {
		return chatChunk{
			ID: j.id(), Object: "chat.completion.chunk", Created: j.created, Model: j.model,
			SystemFingerprint: "fp_mock", Choices: []chunkChoice{{Delta: d, FinishReason: finish}}, Usage: u,
		}
	}
	empty := ""
	if err := s.frame("", chunk(chatDelta{Role: "assistant", Content: &empty}, nil)); err != nil {
		return err
	}
	for i := 1; i <= j.tokens; i++ {
		t := j.token(i)
		if err := s.content(i, "", chunk(chatDelta{Content: &t}, nil)); err != nil {
			return err
		}
	}
	if err := s.frame("", chunk(chatDelta{}, &j.finish)); err != nil {
		return err
	}
	if j.usage {
		c := chunk(chatDelta{}, nil)
		c.Choices, c.Usage = []chunkChoice{}, j.usageObj()
		if err := s.frame("", c); err != nil {
			return err
		}
	}
	return s.write([]byte("data: [DONE]\n\n"))
}

func (s *streamer) completions() error {
	j := s.j
	var u any
	if j.usage {
		u = json.RawMessage("null")
	}
	chunk := func(text string, finish *string) textCompletion {
		return textCompletion{
			ID: j.id(), Object: "text_completion", Created: j.created, Model: j.model,
			SystemFingerprint: "fp_mock", Choices: []textChoice{{Text: text, FinishReason: finish}}, Usage: u,
		}
	}
	for i := 1; i <= j.tokens; i++ {
		if err := s.content(i, "", chunk(j.token(i), nil)); err != nil {
			return err
		}
	}
	if err := s.frame("", chunk("", &j.finish)); err != nil {
		return err
	}
	if j.usage {
		c := chunk("", nil)
		c.Choices, c.Usage = []textChoice{}, j.usageObj()
		if err := s.frame("", c); err != nil {
			return err
		}
	}
	return s.write([]byte("data: [DONE]\n\n"))
}

// Responses API stream events.

type respEvent struct {
	Type           string    `json:"type"`
	SequenceNumber int       `json:"sequence_number"`
	Response       *response `json:"response"`
}

type itemEvent struct {
	Type           string   `json:"type"`
	SequenceNumber int      `json:"sequence_number"`
	OutputIndex    int      `json:"output_index"`
	Item           respItem `json:"item"`
}

type partEvent struct {
	Type           string      `json:"type"`
	SequenceNumber int         `json:"sequence_number"`
	ItemID         string      `json:"item_id"`
	OutputIndex    int         `json:"output_index"`
	ContentIndex   int         `json:"content_index"`
	Part           respContent `json:"part"`
}

type deltaEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Delta          string `json:"delta"`
	Logprobs       []any  `json:"logprobs"`
}

type textDoneEvent struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Text           string `json:"text"`
	Logprobs       []any  `json:"logprobs"`
}

// next returns the next sequence_number (the first event is 0).
func (s *streamer) next() int {
	n := s.seq
	s.seq++
	return n
}

func (s *streamer) responses() error {
	j := s.j
	itemID := j.itemID()
	initial := j.response(false, "")
	for _, typ := range []string{"response.created", "response.in_progress"} {
		if err := s.frame(typ, respEvent{Type: typ, SequenceNumber: s.next(), Response: &initial}); err != nil {
			return err
		}
	}
	const itemAdded = "response.output_item.added"
	if err := s.frame(itemAdded, itemEvent{Type: itemAdded, SequenceNumber: s.next(), Item: j.item("in_progress", "")}); err != nil {
		return err
	}
	const partAdded = "response.content_part.added"
	if err := s.frame(partAdded, partEvent{Type: partAdded, SequenceNumber: s.next(), ItemID: itemID, Part: textPart("")}); err != nil {
		return err
	}
	const delta = "response.output_text.delta"
	for i := 1; i <= j.tokens; i++ {
		ev := deltaEvent{Type: delta, SequenceNumber: s.next(), ItemID: itemID, Delta: j.token(i), Logprobs: []any{}}
		if err := s.content(i, delta, ev); err != nil {
			return err
		}
	}
	text := j.text()
	const textDone = "response.output_text.done"
	if err := s.frame(textDone, textDoneEvent{Type: textDone, SequenceNumber: s.next(), ItemID: itemID, Text: text, Logprobs: []any{}}); err != nil {
		return err
	}
	const partDone = "response.content_part.done"
	if err := s.frame(partDone, partEvent{Type: partDone, SequenceNumber: s.next(), ItemID: itemID, Part: textPart(text)}); err != nil {
		return err
	}
	const itemDone = "response.output_item.done"
	if err := s.frame(itemDone, itemEvent{Type: itemDone, SequenceNumber: s.next(), Item: j.item(j.respStatus(), text)}); err != nil {
		return err
	}
	final := j.response(true, text)
	typ := "response.completed"
	if final.Status == "incomplete" {
		typ = "response.incomplete"
	}
	return s.frame(typ, respEvent{Type: typ, SequenceNumber: s.next(), Response: &final})
}
