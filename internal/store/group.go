package store

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// maxBatch bounds the operations of one group transaction, so that the
// first caller of a large burst is not held behind all of it.
const maxBatch = 128

// committer is a ledger's group commit. Operations queue; one caller at a
// time, the leader, takes everything queued, decides and writes it in one
// transaction, and releases each waiting caller once that transaction has
// committed. A decision is therefore durable before its caller sends the
// request, and a refusal in a batch writes nothing, exactly as one
// transaction per call did; what is shared is the cost of the commit.
//
// The batch adapts to load without a timer: a caller that finds no
// leader leads at once, on its own goroutine (a lone request pays no
// hand-off); under load, whatever queued while the previous transaction
// ran forms the next one (at most maxBatch), and after a batch of more
// than one the leader yields once before cutting the next, so that callers
// already running can join it. When its own batch is done the leader hands
// the lead to the next waiting caller, so no caller works for others
// longer than one batch.
type committer struct {
	s *local

	mu      sync.Mutex
	idle    *sync.Cond // signalled when leading ends
	queue   []*op
	spare   []*op // the queue's other buffer
	leading bool
	closed  bool
	last    int // operations in the previous batch

	// txs and ops count transactions and what they held (benchmarks).
	txs, ops atomic.Int64
}

func newCommitter(s *local) *committer {
	c := &committer{s: s}
	c.idle = sync.NewCond(&c.mu)
	return c
}

// submit queues o and returns once its transaction ended (o.d, o.err set).
func (c *committer) submit(o *op) {
	o.done = make(chan struct{})
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		o.err = errClosed
		return
	}
	c.queue = append(c.queue, o)
	if c.leading {
		c.mu.Unlock()
		<-o.done
		if !o.lead {
			return // a leader applied it
		}
		c.mu.Lock() // handed the lead; o is still queued
	} else {
		c.leading = true
	}
	c.lead()
}

// enqueue queues o, whose outcome goes to o.then; it never waits. Without
// a leader, one is started on its own goroutine. Once the store is closed
// o ends at once with errClosed.
func (c *committer) enqueue(o *op) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		o.err = errClosed
		o.then(o.err)
		return
	}
	c.queue = append(c.queue, o)
	if c.leading {
		c.mu.Unlock()
		return
	}
	c.leading = true
	c.mu.Unlock()
	go func() {
		c.mu.Lock()
		c.lead()
	}()
}

// lead runs batches; c.mu is held on entry and released on return. It
// returns when the queue is empty or once it handed the lead to a waiting
// caller (asynchronous operations have nobody to hand it to: the leader
// goes on with them).
func (c *committer) lead() {
	for {
		if c.last > 1 {
			c.mu.Unlock()
			runtime.Gosched()
			c.mu.Lock()
		}
		batch := c.queue
		c.queue = c.spare[:0]
		c.mu.Unlock()
		for rest := batch; len(rest) > 0; {
			n := min(len(rest), maxBatch)
			c.txs.Add(1)
			c.ops.Add(int64(n))
			c.s.mu.Lock()
			c.s.apply(rest[:n])
			c.s.mu.Unlock()
			for _, o := range rest[:n] {
				switch {
				case o.then != nil:
					o.then(o.err)
				case o.lead:
					// The leader itself: it returns from submit.
				default:
					close(o.done)
				}
			}
			rest = rest[n:]
		}
		c.mu.Lock()
		c.last = len(batch)
		clear(batch)
		c.spare = batch[:0]
		if len(c.queue) == 0 {
			c.leading = false
			c.idle.Broadcast()
			c.mu.Unlock()
			return
		}
		for _, o := range c.queue {
			if o.then == nil {
				o.lead = true
				close(o.done)
				c.mu.Unlock()
				return
			}
		}
	}
}

// close lets what is queued be applied, then refuses what comes after.
func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	for c.leading {
		c.idle.Wait()
	}
	c.mu.Unlock()
}
