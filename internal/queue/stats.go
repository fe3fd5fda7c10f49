package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stats is the queue's state as one replica reads it: the sums over the
// provider queues, and each queue's own figures (the bounds apply to each
// queue).
type Stats struct {
	Waiting  map[string]int64 `json:"waiting"` // per provider
	Leased   int64            `json:"leased"`
	Retained int64            `json:"retained_jobs"`
	DLQ      int64            `json:"dlq"`
	// Bytes held: requests and metadata, terminals (reservations
	// included), the DLQ's.
	BaseBytes     int64 `json:"base_bytes"`
	TerminalBytes int64 `json:"terminal_bytes"`
	DLQBytes      int64 `json:"dlq_bytes"`
	// Queues is each provider queue's figures.
	Queues map[string]QueueStats `json:"queues"`
}

// QueueStats is one provider queue's figures.
type QueueStats struct {
	Waiting       int64 `json:"waiting"`
	Leased        int64 `json:"leased"`
	Retained      int64 `json:"retained_jobs"`
	DLQ           int64 `json:"dlq"`
	BaseBytes     int64 `json:"base_bytes"`
	TerminalBytes int64 `json:"terminal_bytes"`
	DLQBytes      int64 `json:"dlq_bytes"`
}

// Stats reads the counts of every provider queue in one pipeline (not one
// atomic snapshot: each figure is exact at its own instant).
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	provs, err := q.Providers(ctx)
	if err != nil {
		return Stats{}, err
	}
	type cmds struct {
		waiting, leased, jobs, dlq *redis.IntCmd
		acct                       *redis.MapStringStringCmd
	}
	pipe := q.c.Pipeline()
	cs := make([]cmds, len(provs))
	for i, pr := range provs {
		p := q.ProviderPrefix(pr)
		cs[i] = cmds{pipe.ZCard(ctx, p+"w"), pipe.ZCard(ctx, p+"leases"), pipe.ZCard(ctx, p+"jobs"), pipe.ZCard(ctx, p+"dlq"),
			pipe.HGetAll(ctx, p+"acct")}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Stats{}, err
	}
	s := Stats{Waiting: make(map[string]int64, len(provs)), Queues: make(map[string]QueueStats, len(provs))}
	for i, pr := range provs {
		c := cs[i]
		a := c.acct.Val()
		n := func(f string) int64 { v, _ := strconv.ParseInt(a[f], 10, 64); return v }
		qs := QueueStats{Waiting: c.waiting.Val(), Leased: c.leased.Val(), Retained: c.jobs.Val(), DLQ: c.dlq.Val(),
			BaseBytes: n("base"), TerminalBytes: n("term"), DLQBytes: n("dlqb")}
		s.Queues[pr] = qs
		s.Waiting[pr] = qs.Waiting
		s.Leased += qs.Leased
		s.Retained += qs.Retained
		s.DLQ += qs.DLQ
		s.BaseBytes += qs.BaseBytes
		s.TerminalBytes += qs.TerminalBytes
		s.DLQBytes += qs.DLQBytes
	}
	return s, nil
}

// Dead is a DLQ entry's diagnostic envelope: what an operator needs to
// decide, never the prompt.
type Dead struct {
	ID           string    `json:"id"`
	Provider     string    `json:"provider"`
	Endpoint     string    `json:"endpoint"`
	Tenant       string    `json:"tenant,omitempty"`
	Tier         int       `json:"tier"`
	Deliveries   int       `json:"deliveries"`
	Error        string    `json:"error"`
	Created      time.Time `json:"created"`
	DeadAt       time.Time `json:"dead_at"`
	RequestBytes int64     `json:"request_bytes"`
}

// ErrNotFound: no such DLQ entry.
var ErrNotFound = errors.New("no such dead-lettered job")

// ErrMalformed: a DLQ entry whose record the queue cannot run (it was
// dead-lettered for that); it can only be dropped.
var ErrMalformed = errors.New("the job record is malformed and cannot be retried; drop it")

// DLQ lists up to limit dead-lettered jobs of every provider queue,
// oldest first.
func (q *Queue) DLQ(ctx context.Context, limit int) ([]Dead, error) {
	limit = max(1, limit)
	provs, err := q.Providers(ctx)
	if err != nil {
		return nil, err
	}
	pipe := q.c.Pipeline()
	heads := make([]*redis.ZSliceCmd, len(provs))
	for i, p := range provs {
		heads[i] = pipe.ZRangeWithScores(ctx, q.ProviderPrefix(p)+"dlq", 0, int64(limit)-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	type entry struct {
		prov, id string
		at       float64
	}
	var all []entry
	for i, h := range heads {
		for _, z := range h.Val() {
			if id, ok := z.Member.(string); ok {
				all = append(all, entry{provs[i], id, z.Score})
			}
		}
	}
	slices.SortFunc(all, func(a, b entry) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]Dead, 0, min(limit, len(all)))
	for _, e := range all {
		if len(out) == limit {
			break
		}
		d, err := q.deadJob(ctx, e.prov, e.id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// find is the provider queue holding dead-lettered job id (an operator
// names a job by its id alone): every queue is asked in one pipeline.
func (q *Queue) find(ctx context.Context, id string) (string, error) {
	if id == "" || len(id) > 256 {
		return "", ErrNotFound
	}
	provs, err := q.Providers(ctx)
	if err != nil {
		return "", err
	}
	pipe := q.c.Pipeline()
	sts := make([]*redis.StringCmd, len(provs))
	for i, p := range provs {
		sts[i] = pipe.HGet(ctx, q.ProviderPrefix(p)+"j:"+id, "st")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	for i, c := range sts {
		if c.Val() == "dead" {
			return provs[i], nil
		}
	}
	return "", ErrNotFound
}

// DeadJob reads one DLQ entry's envelope.
func (q *Queue) DeadJob(ctx context.Context, id string) (Dead, error) {
	prov, err := q.find(ctx, id)
	if err != nil {
		return Dead{}, err
	}
	return q.deadJob(ctx, prov, id)
}

func (q *Queue) deadJob(ctx context.Context, prov, id string) (Dead, error) {
	h, err := q.c.HGetAll(ctx, q.ProviderPrefix(prov)+"j:"+id).Result()
	if err != nil {
		return Dead{}, err
	}
	if h["st"] != "dead" {
		return Dead{}, ErrNotFound
	}
	n := func(k string) int64 { v, _ := strconv.ParseInt(h[k], 10, 64); return v }
	return Dead{ID: id, Provider: prov, Endpoint: h["ep"], Tenant: h["tenant"], Tier: int(n("tier")),
		Deliveries: int(n("dlv")), Error: h["err"], Created: time.UnixMilli(n("created")).UTC(),
		DeadAt: time.UnixMilli(n("dead_at")).UTC(), RequestBytes: n("rb") - metaBytes}, nil
}

// Retry puts a dead-lettered job back in its queue (no origin waits for
// it: the answer is stored for result_ttl); Drop deletes it.
func (q *Queue) Retry(ctx context.Context, id string) error { return q.dlqOp(ctx, "retry", id) }

// Drop deletes a dead-lettered job.
func (q *Queue) Drop(ctx context.Context, id string) error { return q.dlqOp(ctx, "drop", id) }

func (q *Queue) dlqOp(ctx context.Context, op, id string) error {
	prov, err := q.find(ctx, id)
	if err != nil {
		return err
	}
	s, err := q.run(ctx, scriptDLQ, prov, op, id, q.opts.Load().Depth, q.opts.Load().RetainedJobs).Text()
	switch {
	case err != nil:
		return err
	case s == "missing":
		return ErrNotFound
	case s == "full":
		return ErrFull
	case s == "malformed":
		return ErrMalformed
	case s == "retried" || s == "dropped":
		return nil
	}
	return fmt.Errorf("dlq %s: unexpected reply %q", op, s)
}

// String renders the stats as indented JSON (keys sorted) for the CLI.
func (s Stats) String() string {
	b, _ := json.MarshalIndent(s, "", "  ")
	return string(b)
}
