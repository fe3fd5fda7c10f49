package store

import (
	"sync"
	"sync/atomic"
)

// maxBatch bounds the operations of one group transaction, so that the
// first caller of a large burst is not held behind all of it.
const maxBatch = 128

// committer is a ledger's group commit: one goroutine takes every queued
// admission and settlement, decides and writes them in one transaction,
// and releases each caller once that transaction has committed. A
// decision is therefore durable before its caller sends the request, and
// a refusal in a batch writes nothing, exactly as one transaction per
// call did; what is shared is the cost of the commit.
//
// The batch adapts to load without a timer: a lone operation finds the
// committer idle and commits at once; under load, whatever arrived while
// the previous transaction ran forms the next one (at most maxBatch).
type committer struct {
	s *local

	mu     sync.Mutex
	queue  []*op
	closed bool

	// txs and ops count transactions and what they held (benchmarks).
	txs, ops atomic.Int64

	spare  []*op         // the queue's other buffer (committer goroutine only)
	wake   chan struct{} // one pending wake-up at most
	exited chan struct{}
}

func newCommitter(s *local) *committer {
	c := &committer{s: s, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	go c.loop()
	return c
}

// submit queues o and waits until its transaction ended (o.d, o.err set).
func (c *committer) submit(o *op) {
	o.done = make(chan struct{})
	if c.enqueue(o) {
		<-o.done
	}
}

// enqueue queues o; once the store is closed o ends at once with
// errClosed (then called, or done left open for submit to skip).
func (c *committer) enqueue(o *op) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		o.err = errClosed
		if o.then != nil {
			o.then(o.err)
		}
		return false
	}
	c.queue = append(c.queue, o)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is pending: the committer will see o
	}
	return true
}

func (c *committer) loop() {
	defer close(c.exited)
	for range c.wake {
		for {
			c.mu.Lock()
			batch := c.queue
			c.queue = c.spare[:0]
			closed := c.closed
			c.mu.Unlock()
			if len(batch) == 0 {
				c.spare = batch
				if closed {
					return
				}
				break
			}
			for rest := batch; len(rest) > 0; {
				n := min(len(rest), maxBatch)
				c.txs.Add(1)
				c.ops.Add(int64(n))
				c.s.mu.Lock()
				c.s.apply(rest[:n])
				c.s.mu.Unlock()
				for _, o := range rest[:n] {
					if o.then != nil {
						o.then(o.err)
					} else {
						close(o.done)
					}
				}
				rest = rest[n:]
			}
			clear(batch)
			c.spare = batch[:0]
		}
	}
}

// close applies what is queued, then stops the committer; later submits
// get errClosed.
func (c *committer) close() {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if already {
		<-c.exited
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-c.exited
}
