package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stats is the queue's state as one replica reads it.
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
}

// Stats reads the counts in one pipeline (not one atomic snapshot: each
// figure is exact at its own instant).
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	p := q.opts.Load().Prefix
	provs, err := q.c.SMembers(ctx, p+"provs").Result()
	if err != nil {
		return Stats{}, err
	}
	slices.Sort(provs)
	if len(provs) > 1000 {
		provs = provs[:1000] // a bound on what one read returns
	}
	pipe := q.c.Pipeline()
	waits := make([]*redis.IntCmd, len(provs))
	for i, pr := range provs {
		waits[i] = pipe.ZCard(ctx, p+"w:"+pr)
	}
	leased := pipe.ZCard(ctx, p+"leases")
	jobs := pipe.ZCard(ctx, p+"jobs")
	dlq := pipe.ZCard(ctx, p+"dlq")
	acct := pipe.HGetAll(ctx, p+"acct")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Stats{}, err
	}
	s := Stats{Waiting: make(map[string]int64, len(provs)), Leased: leased.Val(), Retained: jobs.Val(), DLQ: dlq.Val()}
	for i, pr := range provs {
		s.Waiting[pr] = waits[i].Val()
	}
	a := acct.Val()
	s.BaseBytes, _ = strconv.ParseInt(a["base"], 10, 64)
	s.TerminalBytes, _ = strconv.ParseInt(a["term"], 10, 64)
	s.DLQBytes, _ = strconv.ParseInt(a["dlqb"], 10, 64)
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

// DLQ lists up to limit dead-lettered jobs, oldest first.
func (q *Queue) DLQ(ctx context.Context, limit int) ([]Dead, error) {
	ids, err := q.c.ZRange(ctx, q.opts.Load().Prefix+"dlq", 0, int64(max(1, limit))-1).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Dead, 0, len(ids))
	for _, id := range ids {
		d, err := q.DeadJob(ctx, id)
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

// DeadJob reads one DLQ entry's envelope.
func (q *Queue) DeadJob(ctx context.Context, id string) (Dead, error) {
	h, err := q.c.HGetAll(ctx, q.opts.Load().Prefix+"j:"+id).Result()
	if err != nil {
		return Dead{}, err
	}
	if h["st"] != "dead" {
		return Dead{}, ErrNotFound
	}
	n := func(k string) int64 { v, _ := strconv.ParseInt(h[k], 10, 64); return v }
	return Dead{ID: id, Provider: h["prov"], Endpoint: h["ep"], Tenant: h["tenant"], Tier: int(n("tier")),
		Deliveries: int(n("dlv")), Error: h["err"], Created: time.UnixMilli(n("created")).UTC(),
		DeadAt: time.UnixMilli(n("dead_at")).UTC(), RequestBytes: n("rb") - metaBytes}, nil
}

// Retry puts a dead-lettered job back in its queue (no origin waits for
// it: the answer is stored for result_ttl); Drop deletes it.
func (q *Queue) Retry(ctx context.Context, id string) error { return q.dlqOp(ctx, "retry", id) }

// Drop deletes a dead-lettered job.
func (q *Queue) Drop(ctx context.Context, id string) error { return q.dlqOp(ctx, "drop", id) }

func (q *Queue) dlqOp(ctx context.Context, op, id string) error {
	s, err := scriptDLQ.Run(ctx, q.c, q.keys(), q.opts.Load().Prefix, op, id, q.opts.Load().Depth, q.opts.Load().RetainedJobs).Text()
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
