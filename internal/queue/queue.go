// Package queue is Switchboard's distributed execution state machine: a
// job's life from enqueue through lease, heartbeat, publication,
// completion, requeue, dead-lettering, cancellation and reclaim, each
// transition one Lua script run atomically on Redis (the scripts sit
// beside this file). Leases are fenced by a random owner token and a
// generation checked inside every transition, and every expiry is Redis
// TIME, never a host clock. See docs/queue.md for the state diagram and
// the guarantees.
package queue

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/redisconn"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed common.lua
	luaCommon string
	//go:embed enqueue.lua
	luaEnqueue string
	//go:embed lease.lua
	luaLease string
	//go:embed heartbeat.lua
	luaHeartbeat string
	//go:embed publish.lua
	luaPublish string
	//go:embed complete.lua
	luaComplete string
	//go:embed requeue.lua
	luaRequeue string
	//go:embed cancel.lua
	luaCancel string
	//go:embed origin.lua
	luaOrigin string
	//go:embed reap.lua
	luaReap string
	//go:embed dlq.lua
	luaDLQ string

	scriptEnqueue   = redis.NewScript(luaCommon + luaEnqueue)
	scriptLease     = redis.NewScript(luaCommon + luaLease)
	scriptHeartbeat = redis.NewScript(luaCommon + luaHeartbeat)
	scriptPublish   = redis.NewScript(luaCommon + luaPublish)
	scriptComplete  = redis.NewScript(luaCommon + luaComplete)
	scriptRequeue   = redis.NewScript(luaCommon + luaRequeue)
	scriptCancel    = redis.NewScript(luaCommon + luaCancel)
	scriptOrigin    = redis.NewScript(luaCommon + luaOrigin)
	scriptReap      = redis.NewScript(luaCommon + luaReap)
	scriptDLQ       = redis.NewScript(luaCommon + luaDLQ)
)

// Format is this code's record format; every provider queue of the
// namespace holds it. A later format gets its own namespace (a new tag
// version) and runs beside this one.
const (
	Format = "1"
	// Root starts every key and channel name of the queue.
	Root = "switchboard:"
	// Namespace is the key prefix of one provider's queue, spelled for
	// people (logs, health detail): each provider's queue is its own hash
	// tag, so a Redis Cluster spreads the queues over its masters (see
	// ProviderPrefix).
	Namespace = Root + "{q:v1:<provider>}:"
	// metaBytes is each job's allowance for its record, waiting-state
	// cancellation envelope and DLQ note, counted with its request.
	metaBytes = 4096
	// inlineMax is the largest terminal sent inside the completion notice
	// (larger ones are read back with one GET).
	inlineMax = 256 << 10
	// reapBatch bounds each index walked by one reaper pass.
	reapBatch = 100
)

// Errors of the transitions.
var (
	// ErrFull: the provider's waiting queue (or retention) is at its bound.
	ErrFull = errors.New("queue is full")
	// ErrLost: this delivery no longer owns the job (its lease expired and
	// the job moved on); nothing was changed.
	ErrLost = errors.New("lease lost")
	// ErrCanceled: the job was canceled while this delivery held it.
	ErrCanceled = errors.New("job canceled")
	// ErrIncompatible: the namespace holds another record format.
	ErrIncompatible = errors.New("queue namespace holds an incompatible format")
	// ErrTooLarge: a terminal larger than the capacity reserved for it.
	ErrTooLarge = errors.New("terminal exceeds its reserved capacity")
)

// Options bound the queue; zero values take the defaults of the config's
// queue section (config.QueueDefaults).
type Options struct {
	Depth              int
	MaxDeliveries      int
	Lease, OriginLease time.Duration
	RetainedJobs       int
	RetainedBase       int64
	RetainedTerminal   int64
	UnaryTerminal      int64
	StreamTerminal     int64
	ResultTTL          time.Duration
	DLQMax             int
	DLQBytes           int64
	DLQTTL             time.Duration
	// Prefix overrides Root (tests run several queues on one server).
	Prefix string
}

// def sets *p to v when *p is not positive.
func def[T int | int64 | time.Duration](p *T, v T) {
	if *p <= 0 {
		*p = v
	}
}

// OptionsOf are the bounds of a config's queue section.
func OptionsOf(q *config.Queue) Options {
	return Options{Depth: q.Depth, MaxDeliveries: q.MaxDeliveries, Lease: q.Lease.D(), OriginLease: q.OriginLease.D(),
		RetainedJobs: q.RetainedJobs, RetainedBase: q.RetainedBaseBytes, RetainedTerminal: q.RetainedTerminalBytes,
		UnaryTerminal: q.UnaryTerminalBytes, StreamTerminal: q.StreamTerminalBytes, ResultTTL: q.ResultTTL.D(),
		DLQMax: q.DLQMax, DLQBytes: q.DLQBytes, DLQTTL: q.DLQTTL.D()}
}

func (o *Options) defaults() {
	d := config.QueueDefaults()
	do := OptionsOf(&d)
	def(&o.Depth, do.Depth)
	def(&o.MaxDeliveries, do.MaxDeliveries)
	def(&o.Lease, do.Lease)
	def(&o.OriginLease, do.OriginLease)
	def(&o.RetainedJobs, do.RetainedJobs)
	def(&o.RetainedBase, do.RetainedBase)
	def(&o.RetainedTerminal, do.RetainedTerminal)
	def(&o.UnaryTerminal, do.UnaryTerminal)
	def(&o.StreamTerminal, do.StreamTerminal)
	def(&o.ResultTTL, do.ResultTTL)
	def(&o.DLQMax, do.DLQMax)
	def(&o.DLQBytes, do.DLQBytes)
	def(&o.DLQTTL, do.DLQTTL)
	if o.Prefix == "" {
		o.Prefix = Root
	}
}

// Queue is the namespace on one Redis (a server or a cluster): one queue
// per provider, each in its own slot.
type Queue struct {
	c    redis.UniversalClient
	opts atomic.Pointer[Options]
	// configured lists the providers of the config in force (SetProviders).
	configured atomic.Pointer[func() []string]
	// listed holds the providers this process has put in the directory.
	listed sync.Map
}

// New wraps c; it does not talk to Redis (see Check).
func New(c redis.UniversalClient, o Options) *Queue {
	o.defaults()
	q := &Queue{c: c}
	q.opts.Store(&o)
	return q
}

// Options returns the effective options.
func (q *Queue) Options() Options { return *q.opts.Load() }

// SetOptions replaces the bounds (a config reload); the prefix stays.
func (q *Queue) SetOptions(o Options) {
	o.Prefix = q.opts.Load().Prefix
	o.defaults()
	q.opts.Store(&o)
}

// Dial opens a client of one server for the queue (the gateway opens its
// clients with redisconn, which also speaks cluster and Sentinel):
// retries off (a transition whose reply was lost may have run), every
// wait bounded.
func Dial(url string, command, connect time.Duration, pool int) (redis.UniversalClient, error) {
	return redisconn.Dial(redisconn.Options{URL: url, CommandTimeout: command, ConnectTimeout: connect, PoolSize: pool})
}

// Client is the Redis client the queue runs on.
func (q *Queue) Client() redis.UniversalClient { return q.c }

// run runs s in prov's slot: it declares a key of that provider's queue,
// which routes it (in a cluster) to the slot the provider's tag names; the
// script builds the other names from the prefix it is given.
func (q *Queue) run(ctx context.Context, s *redis.Script, prov string, args ...any) *redis.Cmd {
	p := q.ProviderPrefix(prov)
	return s.Run(ctx, q.c, []string{p + "format"}, append([]any{p, q.channels(), prov}, args...)...)
}

// NewID returns a random job id (also used for tokens).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Job is what an ingress enqueues.
type Job struct {
	ID       string
	Provider string // first-choice provider: the queue it waits in
	Tier     int    // higher first
	Stream   bool
	Timeout  time.Duration // timeouts.request: queue wait plus upstream
	Origin   string        // the enqueuing replica's origin id
	OToken   string        // the origin's token for this job
	Endpoint string        // the path, for diagnostics
	Tenant   string        // for diagnostics
	Request  []byte        // opaque to the queue
}

// Enqueued reports where an accepted job stands.
type Enqueued struct {
	// Deadline is the job's total deadline in Redis time.
	Deadline time.Time
}

// Enqueue admits j into its provider's waiting queue; ErrFull (wrapped,
// naming the bound) when that queue is at depth or its retention is
// exhausted.
func (q *Queue) Enqueue(ctx context.Context, j *Job) (Enqueued, error) {
	if !validProvider(j.Provider) {
		return Enqueued{}, fmt.Errorf("enqueue: bad provider name %q", j.Provider)
	}
	stream := "0"
	if j.Stream {
		stream = "1"
	}
	o := q.opts.Load()
	res, err := q.run(ctx, scriptEnqueue, j.Provider, j.ID, max(0, min(j.Tier, 1000)),
		j.Timeout.Milliseconds(), j.Origin, j.OToken, o.OriginLease.Milliseconds(), j.Request,
		o.Depth, o.RetainedJobs, o.RetainedBase, metaBytes, j.Endpoint, j.Tenant, stream).StringSlice()
	if err != nil {
		return Enqueued{}, err
	}
	switch {
	case len(res) >= 3 && res[0] == "ok":
		q.list(ctx, j.Provider)
		return Enqueued{Deadline: msTime(res[2])}, nil
	case len(res) >= 2 && res[0] == "full":
		return Enqueued{}, fmt.Errorf("%w (%s)", ErrFull, res[1])
	case len(res) >= 2 && res[0] == "incompatible":
		return Enqueued{}, fmt.Errorf("%w: format %q", ErrIncompatible, res[1])
	}
	return Enqueued{}, fmt.Errorf("enqueue: unexpected reply %v", res)
}

func msTime(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMilli(n)
}

// Cap is a provider a worker may lease for and its fleet-wide concurrency
// limit (0 = none).
type Cap struct {
	Provider string
	Limit    int
}

// Lease is one delivery of a job to a worker.
type Lease struct {
	ID         string
	Token      string
	Gen        string
	Deliveries int
	Provider   string
	// Deadline is the job's total deadline; Now the Redis time at lease,
	// so Deadline.Sub(Now) is the time left without reading a host clock.
	Deadline, Now time.Time
	Request       []byte
}

// Skipped reports a waiting record the lease had to drop (malformed) or
// expire (deadline passed while waiting).
type Skipped struct{ ID, Why string }

func (s *Skipped) Error() string { return "skipped job " + s.ID + ": " + s.Why }

func fenced(s string, err error) error {
	if err != nil {
		return err
	}
	switch s {
	case "ok":
		return nil
	case "canceled":
		return ErrCanceled
	case "lost":
		return ErrLost
	case "too_large":
		return ErrTooLarge
	}
	return fmt.Errorf("unexpected reply %q", s)
}

// Heartbeat extends l by the lease time; ErrLost or ErrCanceled say to stop.
func (q *Queue) Heartbeat(ctx context.Context, l *Lease) error {
	return fenced(q.run(ctx, scriptHeartbeat, l.Provider, l.ID, l.Token, l.Gen, q.opts.Load().Lease.Milliseconds()).Text())
}

// Message kinds on an origin's channel.
const (
	KindHead     = "H" // status and headers of a stream
	KindChunk    = "C" // stream bytes
	KindTerminal = "T" // the terminal is stored (payload: it, when small)
	KindRequeued = "R" // the delivery was lost; the job waits again
	KindCanceled = "X" // canceled or dead-lettered (payload: the envelope)
)

// Publish sends one message to the job's origin, fenced by l.
func (q *Queue) Publish(ctx context.Context, l *Lease, kind string, seq int, payload []byte) error {
	return fenced(q.run(ctx, scriptPublish, l.Provider, l.ID, l.Token, l.Gen, kind, seq, payload).Text())
}

// Complete stores terminal as the job's result, fenced by l.
func (q *Queue) Complete(ctx context.Context, l *Lease, terminal []byte) error {
	return fenced(q.run(ctx, scriptComplete, l.Provider, l.ID, l.Token, l.Gen, terminal,
		q.opts.Load().ResultTTL.Milliseconds(), inlineMax).Text())
}

// Requeue gives l back (or dead-letters the job after max deliveries):
// dead reports the latter.
func (q *Queue) Requeue(ctx context.Context, l *Lease, why string) (dead bool, err error) {
	return q.requeue(ctx, l, why, false)
}

// giveBack returns a handed delivery the worker never started: the job
// waits again, and the delivery is not counted.
func (q *Queue) giveBack(ctx context.Context, l *Lease, why string) error {
	_, err := q.requeue(ctx, l, why, true)
	return err
}

func (q *Queue) requeue(ctx context.Context, l *Lease, why string, unstarted bool) (dead bool, err error) {
	u := "0"
	if unstarted {
		u = "1"
	}
	s, err := q.run(ctx, scriptRequeue, l.Provider, l.ID, l.Token, l.Gen, why, q.opts.Load().MaxDeliveries,
		q.opts.Load().ResultTTL.Milliseconds(), u).Text()
	switch {
	case err != nil:
		return false, err
	case s == "dead":
		return true, nil
	case s == "requeued":
		return false, nil
	}
	return false, fenced(s, nil)
}

// Cancel cancels job id of prov's queue on behalf of its origin (otok;
// "" = operator). It reports the state the job was in ("waiting" and
// "leased" mean this call canceled it).
func (q *Queue) Cancel(ctx context.Context, prov, id, otok string) (string, error) {
	return q.run(ctx, scriptCancel, prov, id, otok, q.opts.Load().ResultTTL.Milliseconds()).Text()
}

// OriginState renews the origin's claim on job id of prov's queue and
// reports the job's state and generation; ack=true releases a finished
// job's record instead.
func (q *Queue) OriginState(ctx context.Context, prov, id, otok string, ack bool) (state, gen string, err error) {
	a := "0"
	if ack {
		a = "1"
	}
	res, err := q.run(ctx, scriptOrigin, prov, id, otok, q.opts.Load().OriginLease.Milliseconds(), a).StringSlice()
	if err != nil {
		return "", "", err
	}
	if len(res) < 2 {
		return "", "", fmt.Errorf("origin: unexpected reply %v", res)
	}
	return res[0], res[1], nil
}

// Terminal reads the stored result of job id of prov's queue (nil when
// none).
func (q *Queue) Terminal(ctx context.Context, prov, id string) ([]byte, error) {
	b, err := q.c.Get(ctx, q.ProviderPrefix(prov)+"t:"+id).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return b, err
}
