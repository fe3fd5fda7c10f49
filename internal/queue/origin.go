package queue

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Msg is one message from a job's worker (or the reaper) to its origin.
type Msg struct {
	Gen     string
	Kind    string
	Seq     int
	Payload []byte
}

// Origin receives the messages of the jobs this replica enqueued: one
// subscription per replica on its own channel, demultiplexed by job id, so
// a thousand waiting clients hold one Redis connection, not a thousand.
// Pub/sub is not durable: a message lost in a reconnect shows as a gap in
// a stream's sequence, and terminals are read back from their durable
// copy, so a loss is detected, never silently accepted.
type Origin struct {
	ID  string
	q   *Queue
	ps  *redis.PubSub
	log *slog.Logger

	mu    sync.Mutex
	waits map[string]*Watch
}

// Bounds of what waits for one job's reader (a slow client): beyond
// either, messages are dropped and the reader sees the sequence gap (its
// stream ends with an error event) instead of this replica's memory
// growing with the provider's speed.
const (
	originBuffer      = 4096
	originBufferBytes = 8 << 20
)

// Watch receives one job's messages.
type Watch struct {
	C      <-chan Msg
	c      chan Msg
	queued atomic.Int64 // payload bytes sent to C and not yet Taken
}

// Took releases m's bytes from the job's bound once the reader has it.
func (w *Watch) Took(m Msg) { w.queued.Add(-int64(len(m.Payload))) }

// StartOrigin subscribes this replica's origin channel and returns once
// Redis confirmed it (so no message published afterwards can be missed).
func (q *Queue) StartOrigin(ctx context.Context, log *slog.Logger) (*Origin, error) {
	o := &Origin{ID: NewID(), q: q, log: log, waits: map[string]*Watch{}}
	o.ps = q.c.Subscribe(ctx, q.originChannel(o.ID))
	if _, err := o.ps.Receive(ctx); err != nil {
		o.ps.Close()
		return nil, err
	}
	ch := o.ps.Channel(redis.WithChannelSize(4096))
	go o.loop(ch)
	return o, nil
}

// Close ends the subscription.
func (o *Origin) Close() error { return o.ps.Close() }

func (o *Origin) loop(ch <-chan *redis.Message) {
	for m := range ch {
		id, msg, ok := parseMsg([]byte(m.Payload))
		if !ok {
			o.log.Warn("queue: ignoring a malformed origin message", "bytes", len(m.Payload))
			continue
		}
		o.mu.Lock()
		w := o.waits[id]
		o.mu.Unlock()
		if w == nil {
			continue // a job this origin no longer waits for
		}
		n := int64(len(msg.Payload))
		if w.queued.Add(n) > originBufferBytes {
			w.queued.Add(-n)
			continue // the reader is behind; it sees the sequence gap
		}
		select {
		case w.c <- msg:
		default:
			w.queued.Add(-n)
		}
	}
}

// parseMsg splits "id\ngen\nkind\nseq\npayload".
func parseMsg(b []byte) (string, Msg, bool) {
	var parts [4][]byte
	for i := range parts {
		j := bytes.IndexByte(b, '\n')
		if j < 0 {
			return "", Msg{}, false
		}
		parts[i], b = b[:j], b[j+1:]
	}
	seq, err := strconv.Atoi(string(parts[3]))
	if err != nil {
		return "", Msg{}, false
	}
	return string(parts[0]), Msg{Gen: string(parts[1]), Kind: string(parts[2]), Seq: seq, Payload: b}, true
}

// Watch registers a job before it is enqueued; stop unregisters it.
func (o *Origin) Watch(id string) (w *Watch, stop func()) {
	ch := make(chan Msg, originBuffer)
	w = &Watch{C: ch, c: ch}
	o.mu.Lock()
	o.waits[id] = w
	o.mu.Unlock()
	return w, func() {
		o.mu.Lock()
		delete(o.waits, id)
		o.mu.Unlock()
	}
}
