package queue

import (
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Asynchronous publication: a stream's head and chunks go to the origin
// without the worker waiting for each one's round trip. Messages leave in
// the order sent, pipelined on one connection (Redis runs a connection's
// commands in order), each still the fenced publish script: a canceled job
// or a lost lease publishes nothing more, and the first refusal is what
// every later Send and the completion report. What waits is bounded; past
// the bound Send waits for the batch in flight (itself bounded by the
// delivery's operation timeout).

// Bounds of what one delivery has sent and Redis has not yet answered.
const (
	sendMaxMsgs  = 64
	sendMaxBytes = 1 << 20
)

type sendMsg struct {
	kind    string
	seq     int
	payload []byte
}

type sender struct {
	mu      sync.Mutex
	cond    sync.Cond
	queue   []sendMsg
	bytes   int  // payload bytes queued or in flight
	running bool // a goroutine is publishing
	err     error
}

// Send queues one message to the origin and returns at once (unless the
// bound is reached); the error is the first a previous message met:
// ErrCanceled or ErrLost say to stop.
func (d *Delivery) Send(kind string, seq int, payload []byte) error {
	s := &d.send
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cond.L == nil {
		s.cond.L = &s.mu
	}
	for s.err == nil && len(s.queue) > 0 && (len(s.queue) >= sendMaxMsgs || s.bytes+len(payload) > sendMaxBytes) {
		s.cond.Wait()
	}
	if s.err != nil {
		return s.err
	}
	s.queue = append(s.queue, sendMsg{kind: kind, seq: seq, payload: append([]byte(nil), payload...)})
	s.bytes += len(payload)
	if !s.running {
		s.running = true
		go d.sendLoop()
	}
	return nil
}

// Flush waits until every message sent is published (or refused) and
// returns the first error.
func (d *Delivery) Flush() error {
	s := &d.send
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.running {
		s.cond.Wait()
	}
	return s.err
}

func (d *Delivery) sendLoop() {
	s := &d.send
	s.mu.Lock()
	for len(s.queue) > 0 && s.err == nil {
		batch := s.queue
		s.queue = nil
		s.mu.Unlock()
		err := d.publishBatch(batch)
		s.mu.Lock()
		for _, m := range batch {
			s.bytes -= len(m.payload)
		}
		if err != nil && s.err == nil {
			s.err = d.noteLost(err)
		}
		s.cond.Broadcast()
	}
	s.queue, s.bytes = nil, 0 // after a refusal nothing more is sent
	s.running = false
	s.cond.Broadcast()
	s.mu.Unlock()
}

// publishBatch publishes batch in order in one pipeline; the first
// refusal or failure is returned (later messages were refused too, or
// are dropped).
func (d *Delivery) publishBatch(batch []sendMsg) error {
	ctx, cancel := d.ctx()
	defer cancel()
	p := d.q.ProviderPrefix(d.Provider)
	for range 2 { // the second time after loading the script
		pipe := d.q.c.Pipeline()
		cmds := make([]*redis.Cmd, len(batch))
		for i, m := range batch {
			cmds[i] = scriptPublish.EvalSha(ctx, pipe, []string{p + "format"},
				p, d.q.channels(), d.Provider, d.ID, d.Token, d.Gen, m.kind, m.seq, m.payload)
		}
		_, _ = pipe.Exec(ctx) // each reply is read below
		for i, c := range cmds {
			if e := c.Err(); e != nil && redis.HasErrorPrefix(e, "NOSCRIPT") {
				// This server has not seen the script: load it and send
				// this message and the ones after it again, in order.
				if err := scriptPublish.Load(ctx, d.q.c).Err(); err != nil {
					return err
				}
				batch = batch[i:]
				break
			}
			if err := fenced(c.Text()); err != nil {
				return err
			}
			if i == len(cmds)-1 {
				return nil
			}
		}
	}
	return errors.New("publish: the script could not be loaded")
}
