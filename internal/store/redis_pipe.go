package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// maxPipeline bounds the scripts of one pipeline, so that the first caller
// of a burst is not held behind all of it (512 decisions are about 50 ms
// of Redis time here). Pipelines go one after the other, so it is large:
// after a stall, what queued goes out in as few round trips as it can,
// rather than each batch waiting for the one before.
const maxPipeline = 512

// pipe sends the store's scripts to Redis in pipelines: one goroutine
// takes every call queued, writes them as one pipeline (one write and one
// read on one connection instead of one round trip each, on both sides)
// and hands each caller its reply. As with the SQLite committer, the batch
// is whatever arrived while the previous pipeline was out: a lone call is
// sent at once, and under load the batches grow by themselves. Calls run
// in the order they were queued, so a settlement queued before a usage
// read of the same replica is applied before it.
//
// Each script is still one atomic decision: pipelining changes how many
// are written per syscall, not what each one does. A call whose pipeline
// fails (timeout, connection lost) gets the error and is not replayed: it
// may have run.
type pipe struct {
	r *Redis

	mu     sync.Mutex
	queue  []*call
	closed bool

	spare  []*call // the queue's other buffer (pipe goroutine only)
	wake   chan struct{}
	exited chan struct{}
}

// script is a Lua script and its SHA-1 (EVALSHA names it by that).
type script struct{ src, sha string }

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(h[:])}
}

// call is one script run: cmd is the whole command (EVALSHA, the SHA, the
// key count, keys, arguments). done is closed when v and err are set or,
// for a call nobody waits for, then is run instead (by the pipe goroutine:
// it must be short).
type call struct {
	script *script
	cmd    []any
	v      any
	err    error
	done   chan struct{}
	then   func(v any, err error)
	// state: queued, then sent or dropped (its caller left first; it is
	// never sent).
	state atomic.Int32
}

const (
	callQueued int32 = iota
	callSent
	callDropped
)

func newPipe(r *Redis) *pipe {
	p := &pipe{r: r, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	go p.loop()
	return p
}

// enqueue queues c; false when the pipe is closed.
func (p *pipe) enqueue(c *call) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default: // a wake-up is pending: the pipe goroutine will see c
	}
	return true
}

// doAll runs calls, queued together so that they go in one pipeline (a
// cluster client sends each server its share at once), and waits for
// every reply, as do does for one.
func (p *pipe) doAll(ctx context.Context, cs []*call) {
	p.mu.Lock()
	closed := p.closed
	for _, c := range cs {
		c.done = make(chan struct{})
		if closed {
			c.err = errClosed
			close(c.done)
		} else {
			p.queue = append(p.queue, c)
		}
	}
	p.mu.Unlock()
	if !closed {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	for _, c := range cs {
		select {
		case <-c.done:
		case <-ctx.Done():
			if c.state.CompareAndSwap(callQueued, callDropped) {
				c.err = ctx.Err()
				continue
			}
			<-c.done
		}
	}
}

// do runs one script and waits for its reply. A caller that leaves (ctx)
// while its call is still queued drops it: it is never sent, so nothing
// ran. Once sent, the call is waited for: its pipeline is bounded by the
// command timeout, and a decision that may have been applied is not
// walked away from.
func (p *pipe) do(ctx context.Context, c *call) (any, error) {
	c.done = make(chan struct{})
	if !p.enqueue(c) {
		return nil, errClosed
	}
	select {
	case <-c.done:
		return c.v, c.err
	case <-ctx.Done():
		if c.state.CompareAndSwap(callQueued, callDropped) {
			return nil, ctx.Err()
		}
		<-c.done
		return c.v, c.err
	}
}

func (p *pipe) loop() {
	defer close(p.exited)
	for range p.wake {
		for {
			p.mu.Lock()
			batch := p.queue
			p.queue = p.spare[:0]
			closed := p.closed
			p.mu.Unlock()
			if len(batch) == 0 {
				p.spare = batch
				if closed {
					return
				}
				break
			}
			for rest := batch; len(rest) > 0; {
				n := min(len(rest), maxPipeline)
				p.send(rest[:n])
				rest = rest[n:]
			}
			clear(batch)
			p.spare = batch[:0]
		}
	}
}

// maxScriptBatch bounds the decisions of one batch script (redis_batch.lua),
// so that one script does not hold Redis for long (64 are a few ms).
const maxScriptBatch = 64

// unit is one command of a pipeline: one call's script, or a batch
// script running several calls.
type unit struct {
	calls  []*call
	script *script
	cmd    []any
}

// batchable: an admission or a settlement, whose functions the batch
// script runs. A cluster sends each call alone (a batch's keys would
// span slots).
func (p *pipe) batchable(c *call) bool {
	return !p.r.cluster && (c.script == scriptAdmit || c.script == scriptSettle)
}

// units groups calls: each run of consecutive admissions and settlements
// becomes one batch (at most maxScriptBatch), every other call a unit of its
// own. Order is kept, within a batch and between units.
func (p *pipe) units(calls []*call) []unit {
	us := make([]unit, 0, len(calls))
	for i := 0; i < len(calls); {
		j := i + 1
		if p.batchable(calls[i]) {
			for j < len(calls) && j-i < maxScriptBatch && p.batchable(calls[j]) {
				j++
			}
		}
		if j-i == 1 {
			us = append(us, unit{calls: calls[i:j], script: calls[i].script, cmd: calls[i].cmd})
		} else {
			us = append(us, unit{calls: calls[i:j], script: scriptBatch, cmd: batchCmd(calls[i:j])})
		}
		i = j
	}
	return us
}

// batchCmd is redis_batch.lua's command for calls: their keys, then per
// call its kind and counts, then their arguments. Each call's cmd is
// "evalsha", sha, key count, keys..., arguments...
func batchCmd(calls []*call) []any {
	nk, size := 0, 4+3*len(calls)
	for _, c := range calls {
		nk += c.cmd[2].(int)
		size += len(c.cmd) - 3
	}
	cmd := make([]any, 0, size)
	cmd = append(cmd, "evalsha", &scriptBatch.sha, nk)
	for _, c := range calls {
		cmd = append(cmd, c.cmd[3:3+c.cmd[2].(int)]...)
	}
	cmd = append(cmd, len(calls))
	for _, c := range calls {
		k := c.cmd[2].(int)
		kind := "a"
		if c.script == scriptSettle {
			kind = "s"
		}
		cmd = append(cmd, kind, k, len(c.cmd)-3-k)
	}
	for _, c := range calls {
		cmd = append(cmd, c.cmd[3+c.cmd[2].(int):]...)
	}
	return cmd
}

// send runs calls as one pipeline of EVALSHA; the scripts Redis did not
// have (NOSCRIPT: nothing ran) go again as EVAL with their source.
func (p *pipe) send(all []*call) {
	calls := all[:0:0]
	for _, c := range all {
		if c.state.CompareAndSwap(callQueued, callSent) {
			calls = append(calls, c)
		}
	}
	if len(calls) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.r.o.CommandTimeout)
	defer cancel()
	us := p.units(calls)
	cmds := make([]*redis.Cmd, len(us))
	pl := p.r.c.Pipeline()
	for i, u := range us {
		cmds[i] = redis.NewCmd(ctx, u.cmd...)
		_ = pl.Process(ctx, cmds[i])
	}
	_, _ = pl.Exec(ctx)
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pl := p.r.c.Pipeline()
		for _, i := range again {
			u := &us[i]
			u.cmd[0], u.cmd[1] = "eval", &u.script.src
			cmds[i] = redis.NewCmd(ctx, u.cmd...)
			_ = pl.Process(ctx, cmds[i])
		}
		_, _ = pl.Exec(ctx)
	}
	reported := false
	for i, u := range us {
		v, err := cmds[i].Val(), cmds[i].Err()
		if err != nil && !reported {
			// Once per pipeline: a lost connection fails every call of it.
			p.r.failed(context.Background(), err)
			var reply redis.Error
			reported = !errors.As(err, &reply)
		}
		if len(u.calls) == 1 {
			u.calls[0].v, u.calls[0].err = v, err
		} else {
			xs, ok := v.([]any)
			if err == nil && (!ok || len(xs) != len(u.calls)) {
				err = fmt.Errorf("batch reply %T of %d elements for %d calls", v, len(xs), len(u.calls))
			}
			for j, c := range u.calls {
				c.v, c.err = nil, err
				if err != nil {
					continue
				}
				if e, ok := xs[j].(error); ok {
					c.err = e
				} else {
					c.v = xs[j]
				}
			}
		}
		for _, c := range u.calls {
			if c.then != nil {
				c.then(c.v, c.err)
			} else {
				close(c.done)
			}
		}
	}
}

// close sends what is queued, then stops; later calls get errClosed.
func (p *pipe) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	<-p.exited
}
