package queue

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Leasing across providers: each provider's queue is its own slot, so a
// lease is one script in one provider's queue. A lease call keeps today's
// rotation (providers in turn from start, the first with room and a
// waiting job wins) in at most one round trip when the first provider it
// tries has work: that provider's lease script and a look at every other
// queue (its waiting count, and its leased count where a fleet-wide limit
// applies) go in one pipeline, which a cluster client sends to each
// master at once. Only when the first has nothing does a second round trip
// lease from the next queue, in rotation, that the look found with work.
// A worker remembers which queues had work (those looks, and the wake-ups,
// which name their provider) and tries one of those first, so the common
// case, one provider with work, costs one round trip as on one slot.

// Lease takes the best waiting job among caps (rotating from start), or
// returns nil, nil when none can be leased now. A *Skipped error reports
// a record dropped on the way; call again.
func (q *Queue) Lease(ctx context.Context, worker string, caps []Cap, start int) (*Lease, error) {
	return q.leaseAmong(ctx, worker, caps, start, nil)
}

// busy is a worker's memory of which provider queues had work.
type busy struct {
	mu  sync.Mutex
	has map[string]bool
}

func (b *busy) set(prov string, v bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	if b.has == nil {
		b.has = map[string]bool{}
	}
	if v {
		if !validProvider(prov) || len(b.has) >= maxQueues {
			return // a wake-up is Redis input: its names are bounded
		}
		b.has[prov] = true
	} else {
		delete(b.has, prov)
	}
	b.mu.Unlock()
}

func (b *busy) get(prov string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.has[prov]
}

func (q *Queue) leaseArgs(worker, tok string, c Cap) []any {
	o := q.opts.Load()
	return []any{q.ProviderPrefix(c.Provider), q.channels(), c.Provider, worker, tok, o.Lease.Milliseconds(),
		o.UnaryTerminal, o.StreamTerminal, o.RetainedTerminal, o.ResultTTL.Milliseconds(), max(0, c.Limit)}
}

func (q *Queue) leaseOne(ctx context.Context, worker string, c Cap) (*Lease, error) {
	tok := NewID()
	return leaseReply(scriptLease.Run(ctx, q.c, []string{q.ProviderPrefix(c.Provider) + "format"}, q.leaseArgs(worker, tok, c)...), tok)
}

func leaseReply(cmd *redis.Cmd, tok string) (*Lease, error) {
	res, err := cmd.StringSlice()
	if err != nil {
		return nil, err
	}
	switch {
	case len(res) == 0:
		return nil, nil
	case res[0] == "skip" && len(res) >= 3:
		return nil, &Skipped{ID: res[1], Why: res[2]}
	case res[0] == "job" && len(res) >= 8:
		d, _ := strconv.Atoi(res[3])
		return &Lease{ID: res[1], Token: tok, Gen: res[2], Deliveries: d, Deadline: msTime(res[4]), Now: msTime(res[5]),
			Provider: res[6], Request: []byte(res[7])}, nil
	}
	return nil, fmt.Errorf("lease: unexpected reply %v", res)
}

// leaseAmong is Lease with a worker's memory of busy queues (nil: none).
func (q *Queue) leaseAmong(ctx context.Context, worker string, caps []Cap, start int, b *busy) (*Lease, error) {
	n := len(caps)
	if n == 0 {
		return nil, nil
	}
	start = ((start % n) + n) % n
	if n == 1 {
		l, err := q.leaseOne(ctx, worker, caps[0])
		if err == nil {
			b.set(caps[0].Provider, l != nil)
		}
		return l, err
	}
	first := start
	for k := range n {
		if i := (start + k) % n; b.get(caps[i].Provider) {
			first = i
			break
		}
	}
	tok := NewID()
	c0 := caps[first]
	pipe := q.c.Pipeline()
	lease := scriptLease.EvalSha(ctx, pipe, []string{q.ProviderPrefix(c0.Provider) + "format"}, q.leaseArgs(worker, tok, c0)...)
	waiting := make([]*redis.IntCmd, n)
	leased := make([]*redis.IntCmd, n)
	for i, c := range caps {
		if i == first {
			continue
		}
		p := q.ProviderPrefix(c.Provider)
		waiting[i] = pipe.ZCard(ctx, p+"w")
		if c.Limit > 0 {
			leased[i] = pipe.ZCard(ctx, p+"p")
		}
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	// What the look found decides which queue the next lease tries first,
	// whether or not this one needs it: a queue with work never waits for
	// a wake-up that was lost while another queue kept the worker busy.
	for i, c := range caps {
		if w := waiting[i]; w != nil && w.Err() == nil {
			full := leased[i] != nil && leased[i].Err() == nil && leased[i].Val() >= int64(c.Limit)
			b.set(c.Provider, w.Val() > 0 && !full)
		}
	}
	var l *Lease
	var err error
	if e := lease.Err(); e != nil && redis.HasErrorPrefix(e, "NOSCRIPT") {
		// This master has not seen the script yet: Run loads it.
		l, err = q.leaseOne(ctx, worker, c0)
	} else {
		l, err = leaseReply(lease, tok)
	}
	if err == nil {
		b.set(c0.Provider, l != nil)
	}
	if l != nil || isSkipped(err) {
		return l, err
	}
	// The first queue had nothing (or failed): the next in rotation that
	// the look found with work, one round trip each. A queue that failed
	// does not keep the others from being served.
	firstErr := err
	for k := range n {
		i := (start + k) % n
		if i == first {
			continue
		}
		c := caps[i]
		w, werr := waiting[i].Result()
		if werr != nil {
			if firstErr == nil {
				firstErr = werr
			}
			continue
		}
		if w == 0 {
			continue
		}
		if lc := leased[i]; lc != nil && lc.Err() == nil && lc.Val() >= int64(c.Limit) {
			continue // at its fleet-wide limit: waits for a release's wake-up
		}
		l, err := q.leaseOne(ctx, worker, c)
		if err == nil {
			b.set(c.Provider, l != nil)
		}
		if l != nil || isSkipped(err) {
			return l, err
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

func isSkipped(err error) bool {
	_, ok := err.(*Skipped)
	return ok
}
