package queue

import (
	"context"
	"fmt"
	"slices"
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
	return q.leaseAmong(ctx, worker, caps, start, nil, nil)
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

// standby is a worker's standing tokens (lease.lua): one per provider
// queue, which its next lease there uses and under which it stands by
// while idle, so that an enqueue can hand it a job. A handed delivery
// comes by the hand-off message and by the reply of a lease call that
// carried the token, whichever first; claim runs it once. Handed a job,
// a token is spent: the next call uses a new one.
type standby struct {
	mu    sync.Mutex
	cur   map[string]string // provider → its standing token
	toks  map[string]*standTok
	order []string // the tokens in toks, oldest first
}

type standTok struct {
	prov string
	ids  []string // the deliveries claimed under this token
}

// maxToks bounds the tokens a worker remembers: a delivery's two ways in
// (reply and message) arrive within moments, so a spent token is
// forgotten long after its duplicate could come.
const maxToks = 4096

// token is prov's standing token (a fresh one per call without standby).
func (s *standby) token(prov string) string {
	if s == nil {
		return NewID()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.cur[prov]; ok {
		return t
	}
	if s.cur == nil {
		s.cur, s.toks = map[string]string{}, map[string]*standTok{}
	}
	t := NewID()
	s.cur[prov] = t
	s.toks[t] = &standTok{prov: prov}
	s.order = append(s.order, t)
	for len(s.order) > maxToks {
		old := s.order[0]
		s.order = s.order[1:]
		if st := s.toks[old]; st != nil && s.cur[st.prov] == old {
			s.order = append(s.order, old) // still standing: kept
			continue
		}
		delete(s.toks, old)
	}
	return t
}

// claim takes the delivery of job id under tok for the caller: false when
// the other way in brought it already, or tok is none of this worker's (a
// stray message).
func (s *standby) claim(tok, id string) (prov string, ok bool) {
	if s == nil {
		return "", true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.toks[tok]
	if st == nil || slices.Contains(st.ids, id) {
		return "", false
	}
	if len(st.ids) < 16 { // a stale token's calls lease a job or two at most
		st.ids = append(st.ids, id)
	}
	if s.cur[st.prov] == tok {
		delete(s.cur, st.prov)
	}
	return st.prov, true
}

// standing lists the standing tokens by provider (a copy).
func (s *standby) standing() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.cur))
	for p, t := range s.cur {
		out[p] = t
	}
	return out
}

// standFor is how long one idle lease call keeps a worker standing by: a
// few of its idle polls, so a live idle worker never lapses and a dead
// one is handed jobs for at most this long (they come back at their lease
// expiry, as any lost worker's do).
const standFor = 3 * idlePoll

func (q *Queue) leaseArgs(worker, tok string, c Cap, stand bool, mode string) []any {
	o := q.opts.Load()
	var ms int64
	if stand {
		ms = standFor.Milliseconds()
	}
	return []any{q.ProviderPrefix(c.Provider), q.channels(), c.Provider, worker, tok, o.Lease.Milliseconds(),
		o.UnaryTerminal, o.StreamTerminal, o.RetainedTerminal, o.ResultTTL.Milliseconds(), max(0, c.Limit), ms, mode}
}

func (q *Queue) leaseOne(ctx context.Context, worker string, c Cap, s *standby) (*Lease, error) {
	tok := s.token(c.Provider)
	l, err := leaseReply(scriptLease.Run(ctx, q.c, []string{q.ProviderPrefix(c.Provider) + "format"},
		q.leaseArgs(worker, tok, c, s != nil, "lease")...), tok)
	return s.claimed(l), err
}

// claimed is l unless its hand-off message brought it first (it runs).
func (s *standby) claimed(l *Lease) *Lease {
	if l == nil {
		return nil
	}
	if _, ok := s.claim(l.Token, l.ID); !ok {
		return nil
	}
	return l
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

// look is what a look at a queue found: its waiting and leased counts,
// and whether a job was handed to the worker's standing token there.
type look struct {
	waiting, leased int64
	handed          bool
	err             error
}

func lookReply(cmd *redis.Cmd) look {
	v, err := cmd.Slice()
	if err != nil {
		return look{err: err}
	}
	if len(v) < 4 || v[0] != "look" {
		return look{err: fmt.Errorf("lease: unexpected look reply %v", v)}
	}
	w, _ := v[1].(int64)
	p, _ := v[2].(int64)
	h, _ := v[3].(int64)
	return look{waiting: w, leased: p, handed: h == 1}
}

// leaseAmong is Lease with a worker's memory of busy queues (nil: none)
// and its standing tokens (nil: none, it never stands by).
func (q *Queue) leaseAmong(ctx context.Context, worker string, caps []Cap, start int, b *busy, s *standby) (*Lease, error) {
	n := len(caps)
	if n == 0 {
		return nil, nil
	}
	start = ((start % n) + n) % n
	if n == 1 {
		l, err := q.leaseOne(ctx, worker, caps[0], s)
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
	c0 := caps[first]
	tok := s.token(c0.Provider)
	pipe := q.c.Pipeline()
	keys := func(c Cap) []string { return []string{q.ProviderPrefix(c.Provider) + "format"} }
	lease := scriptLease.EvalSha(ctx, pipe, keys(c0), q.leaseArgs(worker, tok, c0, s != nil, "lease")...)
	// The look at every other queue also stands the worker by there.
	lookCmds := make([]*redis.Cmd, n)
	for i, c := range caps {
		if i != first {
			lookCmds[i] = scriptLease.EvalSha(ctx, pipe, keys(c), q.leaseArgs(worker, s.token(c.Provider), c, s != nil, "look")...)
		}
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	looks := make([]look, n)
	for i, cmd := range lookCmds {
		if cmd == nil {
			continue
		}
		if e := cmd.Err(); e != nil && redis.HasErrorPrefix(e, "NOSCRIPT") {
			// This master has not seen the script yet: Run loads it.
			c := caps[i]
			cmd = scriptLease.Run(ctx, q.c, keys(c), q.leaseArgs(worker, s.token(c.Provider), c, s != nil, "look")...)
		}
		looks[i] = lookReply(cmd)
	}
	// What the look found decides which queue the next lease tries first,
	// whether or not this one needs it: a queue with work never waits for
	// a wake-up that was lost while another queue kept the worker busy.
	has := func(i int) bool {
		lk := looks[i]
		full := caps[i].Limit > 0 && lk.leased >= int64(caps[i].Limit)
		return lk.handed || lk.waiting > 0 && !full
	}
	for i, c := range caps {
		if i != first && looks[i].err == nil {
			b.set(c.Provider, has(i))
		}
	}
	var l *Lease
	var err error
	if e := lease.Err(); e != nil && redis.HasErrorPrefix(e, "NOSCRIPT") {
		l, err = q.leaseOne(ctx, worker, c0, s)
	} else {
		l, err = leaseReply(lease, tok)
		l = s.claimed(l)
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
		if e := looks[i].err; e != nil {
			if firstErr == nil {
				firstErr = e
			}
			continue
		}
		if !has(i) {
			continue // nothing waits, or at its fleet-wide limit: a release's wake-up says when
		}
		l, err := q.leaseOne(ctx, worker, c, s)
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
