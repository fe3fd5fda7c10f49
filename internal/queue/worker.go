package queue

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Worker leases jobs and runs them, one goroutine each, up to its
// concurrency. Each delivery has its own heartbeat; a cancellation
// (pushed on the worker's channel, or seen by a heartbeat) or a lost lease
// cancels the delivery's context at once.
type Worker struct {
	Q  *Queue
	ID string
	// Caps lists the providers this worker can serve (its config's), with
	// their fleet-wide concurrency limits; read before every lease.
	Caps        func() []Cap
	Concurrency int
	Log         *slog.Logger
	// Run executes one delivery; ctx ends on cancellation, a lost lease or
	// the job's deadline.
	Run func(ctx context.Context, d *Delivery)
	// OnLost is called when a delivery's lease is lost (a metric).
	OnLost func()

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
	wg      sync.WaitGroup
	// busy remembers which provider queues had work (see lease.go).
	busy busy
	// stand holds the standing tokens an enqueue can hand jobs to.
	stand    standby
	slots    chan struct{}
	stopping bool // under mu: no delivery starts any more
	// handoffs counts the deliveries that came by hand-off messages.
	handoffs atomic.Int64
}

// idlePoll is how often an idle worker leases anyway: a wake-up can be
// lost, a full terminal pool frees without one, and each poll renews the
// worker's standing by (standFor).
const idlePoll = 200 * time.Millisecond

// handWait bounds how long a handed delivery waits for a free slot (the
// lease loop holds one for a moment while it leases); past it the job is
// given back for another worker.
const handWait = 50 * time.Millisecond

// Causes of a delivery's context ending.
var (
	errCanceledByOrigin = errors.New("job canceled")
	errLeaseLost        = errors.New("lease lost")
)

// Delivery is one leased job being run.
type Delivery struct {
	*Lease
	q        *Queue
	opTimout time.Duration
	lostOnce sync.Once
	onLost   func()
	send     sender // see send.go
}

// noteLost reports a lost lease once per delivery, whichever transition
// (heartbeat, publish, complete, requeue) found it.
func (d *Delivery) noteLost(err error) error {
	if errors.Is(err, ErrLost) && d.onLost != nil {
		d.lostOnce.Do(d.onLost)
	}
	return err
}

// OpTimeout bounds each transition of a delivery: a quarter of the lease
// and at most 5 s, so a stuck Redis call cannot outlive the lease.
func (q *Queue) OpTimeout() time.Duration { return min(5*time.Second, q.opts.Load().Lease/4) }

func (d *Delivery) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d.opTimout)
}

// Publish sends a message to the origin, fenced.
func (d *Delivery) Publish(kind string, seq int, payload []byte) error {
	ctx, cancel := d.ctx()
	defer cancel()
	return d.noteLost(d.q.Publish(ctx, d.Lease, kind, seq, payload))
}

// Complete stores the terminal, fenced, after every message sent. A
// message that Redis failed to take (not a refusal) does not keep the
// terminal from being stored: the origin finds the gap by the terminal's
// chunk count.
func (d *Delivery) Complete(terminal []byte) error {
	if err := d.Flush(); errors.Is(err, ErrLost) || errors.Is(err, ErrCanceled) {
		return err
	}
	ctx, cancel := d.ctx()
	defer cancel()
	return d.noteLost(d.q.Complete(ctx, d.Lease, terminal))
}

// Requeue gives the job back (dead-lettered after max deliveries), after
// every message sent.
func (d *Delivery) Requeue(why string) (dead bool, err error) {
	if err := d.Flush(); errors.Is(err, ErrLost) || errors.Is(err, ErrCanceled) {
		return false, err
	}
	ctx, cancel := d.ctx()
	defer cancel()
	dead, err = d.q.Requeue(ctx, d.Lease, why)
	return dead, d.noteLost(err)
}

// Start runs the lease loop until ctx ends, then waits for the running
// deliveries to finish (a stopping worker drains: its jobs keep their
// heartbeat and end by their own deadline at the latest).
//
// Deliveries come two ways: the worker's own lease calls, and hand-offs,
// which an enqueue sends on the worker's channel while it stands by idle
// (lease.lua, enqueue.lua). A handed delivery that finds no free slot, or
// a stopping worker, is given back uncounted.
func (w *Worker) Start(ctx context.Context) {
	if w.ID == "" {
		w.ID = NewID()
	}
	w.running = map[string]context.CancelCauseFunc{}
	w.slots = make(chan struct{}, max(1, w.Concurrency))
	base := context.WithoutCancel(ctx)
	ps := w.Q.c.Subscribe(ctx, w.Q.wakeChannel(), w.Q.workerChannel(w.ID))
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	var handed sync.WaitGroup // handed deliveries being started or given back
	psDone := make(chan struct{})
	go func() {
		defer close(psDone)
		for m := range ps.Channel(redis.WithChannelSize(1024)) {
			switch {
			case m.Channel == w.Q.wakeChannel():
				// A wake-up names the provider whose queue has work (or
				// room): its queue is tried first.
				w.busy.set(m.Payload, true)
				poke()
			case strings.HasPrefix(m.Payload, "+"):
				w.takeHanded(base, m.Payload, &handed, poke)
			default:
				id, _, _ := strings.Cut(m.Payload, "\n")
				w.mu.Lock()
				cancel := w.running[id]
				w.mu.Unlock()
				if cancel != nil {
					cancel(errCanceledByOrigin)
				}
			}
		}
	}()
	start := 0
	down := false // Redis failing: logged once, and once when it answers again
	idle := time.NewTicker(idlePoll)
	defer idle.Stop()
	for ctx.Err() == nil {
		select {
		case w.slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		l, err := w.lease(ctx, start)
		start++
		if err == nil && down {
			down = false
			w.Log.Info("queue: leasing jobs again")
		}
		if l == nil {
			<-w.slots
			var sk *Skipped
			if errors.As(err, &sk) {
				w.Log.Warn("queue: skipped a waiting job", "job", sk.ID, "why", sk.Why)
				continue
			}
			if err != nil && ctx.Err() == nil && !down {
				down = true
				w.Log.Warn("queue: cannot lease jobs; retrying until redis answers", "error", err.Error())
			}
			// Nothing to do: wait for new work, or poll (a wake message
			// can be lost; a full terminal pool frees without one).
			select {
			case <-wake:
			case <-idle.C:
			case <-ctx.Done():
			}
			continue
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer func() { <-w.slots }()
			w.deliver(base, l)
		}()
	}
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	w.withdraw()
	w.wg.Wait()
	w.withdraw() // a delivery that ended meanwhile may have stood by again
	ps.Close()
	<-psDone
	handed.Wait()
}

// takeHanded starts a delivery an enqueue handed to this worker (payload
// as enqueue.lua sends it), or gives it back.
func (w *Worker) takeHanded(base context.Context, payload string, handed *sync.WaitGroup, poke func()) {
	l, ok := parseHanded(payload)
	if !ok {
		w.Log.Warn("queue: ignoring a malformed hand-off message", "bytes", len(payload))
		return
	}
	prov, ok := w.stand.claim(l.Token, l.ID)
	if !ok {
		return // the lease's reply brought it first, or not this worker's
	}
	l.Provider = prov
	if !w.stillHeld(l) {
		return
	}
	w.handoffs.Add(1)
	// start runs l in the slot the caller took, unless the worker stops.
	// Its token is spent: the worker stands by in that queue again under a
	// new one once the delivery ends (or at its next idle poll, whichever
	// first), not as it starts, where the call would compete with the
	// delivery's own first steps.
	start := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.stopping {
			<-w.slots
			return false
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.deliver(base, l)
			<-w.slots
			w.restand(prov, poke)
		}()
		return true
	}
	select {
	case w.slots <- struct{}{}:
		if start() {
			return
		}
	default:
	}
	handed.Add(1)
	go func() {
		defer handed.Done()
		t := time.NewTimer(handWait)
		defer t.Stop()
		select {
		case w.slots <- struct{}{}:
			if start() {
				return
			}
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.Q.OpTimeout())
		defer cancel()
		if err := w.Q.giveBack(ctx, l, "handed to a worker with no free slot"); err != nil && !errors.Is(err, ErrLost) {
			// Its lease expires and the reaper requeues it.
			w.Log.Warn("queue: could not give back a handed job", "job", l.ID, "error", err.Error())
		}
	}()
}

// handStale is how old a hand-off may be (by Redis's time when it was
// sent, against this host's clock) before the worker confirms it still
// holds the job. A hand-off read late — the worker paused, or its
// connection backed up past the lease — may name a job that has since
// been leased to another worker and finished there; running it would call
// the provider a second time, its result refused only at the end.
const handStale = time.Second

// stillHeld reports whether a handed delivery may start: a fresh one at
// once; an old one only once a fenced heartbeat (which also renews the
// lease) says this worker still holds the job. Hosts whose clocks differ
// from Redis's by more than handStale pay that round trip on every
// hand-off, never a duplicate call.
func (w *Worker) stillHeld(l *Lease) bool {
	if time.Since(l.Now) <= handStale {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.Q.OpTimeout())
	defer cancel()
	if err := w.Q.Heartbeat(ctx, l); err != nil {
		// Lost or canceled: another delivery has it. A transport error:
		// its lease expires and the reaper requeues it.
		w.Log.Info("queue: dropping a late hand-off", "job", l.ID, "age", time.Since(l.Now).String(), "error", err.Error())
		return false
	}
	return true
}

// restand stands the worker by in prov's queue under its next token, if
// it has a free slot; work found waiting there wakes the lease loop.
func (w *Worker) restand(prov string, poke func()) {
	w.mu.Lock()
	stopping := w.stopping
	w.mu.Unlock()
	if stopping || len(w.slots) >= cap(w.slots) {
		return // stopping, or busy: its lease loop stands by when a slot frees
	}
	caps := w.Caps()
	i := slices.IndexFunc(caps, func(c Cap) bool { return c.Provider == prov })
	if i < 0 {
		return // no longer configured here
	}
	c := caps[i]
	ctx, cancel := context.WithTimeout(context.Background(), w.Q.OpTimeout())
	defer cancel()
	lk := lookReply(scriptLease.Run(ctx, w.Q.c, []string{w.Q.ProviderPrefix(prov) + "format"},
		w.Q.leaseArgs(w.ID, w.stand.token(prov), c, true, "look")...))
	if lk.err != nil || lk.waiting > 0 || lk.handed {
		poke()
	}
}

// parseHanded reads "+token\nid\ngen\ndeliveries\ndeadline\nnow\nrequest".
func parseHanded(p string) (*Lease, bool) {
	f := strings.SplitN(strings.TrimPrefix(p, "+"), "\n", 7)
	if len(f) < 7 {
		return nil, false
	}
	d, err := strconv.Atoi(f[3])
	if err != nil {
		return nil, false
	}
	return &Lease{Token: f[0], ID: f[1], Gen: f[2], Deliveries: d, Deadline: msTime(f[4]), Now: msTime(f[5]),
		Request: []byte(f[6])}, true
}

// withdraw ends a stopping worker's standing by in every queue (best
// effort: a standing lapses by itself after standFor, and a job handed
// meanwhile is given back).
func (w *Worker) withdraw() {
	toks := w.stand.standing()
	if len(toks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.Q.OpTimeout())
	defer cancel()
	pipe := w.Q.c.Pipeline()
	for prov, tok := range toks {
		p := w.Q.ProviderPrefix(prov)
		pipe.HDel(ctx, p+"idle", tok)
		pipe.ZRem(ctx, p+"idlex", tok)
	}
	_, _ = pipe.Exec(ctx)
}

func (w *Worker) lease(ctx context.Context, start int) (*Lease, error) {
	lctx, cancel := context.WithTimeout(ctx, w.Q.OpTimeout())
	defer cancel()
	return w.Q.leaseAmong(lctx, w.ID, w.Caps(), start, &w.busy, &w.stand)
}

// deliver runs one delivery with its heartbeat.
func (w *Worker) deliver(parent context.Context, l *Lease) {
	ctx, cancel := context.WithCancelCause(parent)
	// The job's own deadline, measured in Redis time at lease.
	ctx, stopDeadline := context.WithTimeout(ctx, l.Deadline.Sub(l.Now))
	defer stopDeadline()
	w.mu.Lock()
	w.running[l.ID] = cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.running, l.ID)
		w.mu.Unlock()
		cancel(nil)
	}()
	d := &Delivery{Lease: l, q: w.Q, opTimout: w.Q.OpTimeout(), onLost: w.OnLost}
	hbDone := make(chan struct{})
	runDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		t := time.NewTicker(w.Q.Options().Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-runDone:
				return
			case <-t.C:
			}
			hctx, hcancel := context.WithTimeout(context.Background(), d.opTimout)
			err := w.Q.Heartbeat(hctx, l)
			hcancel()
			switch {
			case errors.Is(err, ErrCanceled):
				cancel(errCanceledByOrigin)
				return
			case errors.Is(err, ErrLost):
				d.noteLost(err)
				w.Log.Warn("queue: lease lost; stopping the delivery", "job", l.ID, "gen", l.Gen)
				cancel(errLeaseLost)
				return
			case err != nil:
				// Keep the delivery: the lease may outlive a Redis blip.
				w.Log.Warn("queue: heartbeat failed", "job", l.ID, "error", err.Error())
			}
		}
	}()
	w.Run(ctx, d)
	close(runDone)
	<-hbDone
}

// Running reports how many deliveries this worker holds.
func (w *Worker) Running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}
