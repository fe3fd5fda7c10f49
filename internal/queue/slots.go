package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Each provider's queue is its own Redis Cluster slot: every key of it
// (the waiting and leased sets, the indexes, the byte accounting, the
// sequence, the format, and every record of its jobs) starts with
// ProviderPrefix, whose hash tag names the provider. A transition touches
// one job and its provider's queue, so each is one script in one slot,
// and a cluster spreads the queues over its masters by provider. The
// bounds (depth, retention, the terminal pool, the DLQ's) are therefore
// each provider queue's own.
//
// What spans providers is read queue by queue and summed: the stats, the
// reaper's pass, the DLQ listing. The queues are the providers of the
// config in force (SetProviders) and those in the directory, a set in its
// own slot that every replica keeps its configured providers in, so an
// operator's CLI without a config, and a reaper after a provider left the
// config, still find every queue that holds jobs.

// maxQueues bounds how many provider queues one read walks.
const maxQueues = 1000

// ProviderPrefix is the key prefix of prov's queue. A name containing '}'
// ends the tag early, the same way in every key of that provider, so its
// keys still share one slot.
func (q *Queue) ProviderPrefix(prov string) string {
	return q.opts.Load().Prefix + "{q:v1:" + prov + "}:"
}

// channels prefixes the pub/sub channels (not keys: a script in any slot
// may publish to them) and names the directory's slot; its names are
// those of the single-slot layout before per-provider queues.
func (q *Queue) channels() string { return q.opts.Load().Prefix + "{q:v1}:" }

func (q *Queue) directory() string { return q.channels() + "providers" }

// validProvider: a provider name a queue may be named by (config names
// are non-empty; the directory is Redis input and may hold anything).
func validProvider(p string) bool { return p != "" && len(p) <= 1024 }

// SetProviders says where the configured providers are read (the config
// in force, read at each use).
func (q *Queue) SetProviders(f func() []string) { q.configured.Store(&f) }

func (q *Queue) configuredProviders() []string {
	if f := q.configured.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// list puts prov in the directory, once per process (best effort: every
// reaper pass lists its replica's configured providers again).
func (q *Queue) list(ctx context.Context, prov string) {
	if _, ok := q.listed.Load(prov); ok {
		return
	}
	if q.c.SAdd(ctx, q.directory(), prov).Err() == nil {
		q.listed.Store(prov, struct{}{})
	}
}

// Providers lists the provider queues, sorted: the configured providers
// and the directory's (at most maxQueues in all). relist also puts the
// configured ones in the directory, in the same round trip.
func (q *Queue) providers(ctx context.Context, relist bool) ([]string, error) {
	conf := q.configuredProviders()
	pipe := q.c.Pipeline()
	if relist && len(conf) > 0 {
		m := make([]any, len(conf))
		for i, p := range conf {
			m[i] = p
		}
		pipe.SAdd(ctx, q.directory(), m...)
	}
	dir := pipe.SMembers(ctx, q.directory())
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(conf)+len(dir.Val()))
	for _, p := range conf {
		if validProvider(p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	extra := make([]string, 0, len(dir.Val()))
	for _, p := range dir.Val() {
		if validProvider(p) {
			if _, ok := slices.BinarySearch(out, p); !ok {
				extra = append(extra, p)
			}
		}
	}
	slices.Sort(extra)
	out = append(out, extra...)
	if len(out) > maxQueues {
		out = out[:maxQueues] // a bound on what one pass walks; configured first
	}
	slices.Sort(out)
	return out, nil
}

// Providers lists the provider queues (see providers).
func (q *Queue) Providers(ctx context.Context) ([]string, error) { return q.providers(ctx, false) }

// Check refuses a namespace written in another format: a replica must not
// start against records it would misread. Every known provider queue is
// checked.
func (q *Queue) Check(ctx context.Context) error {
	provs, err := q.Providers(ctx)
	if err != nil {
		return err
	}
	pipe := q.c.Pipeline()
	fmts := make([]*redis.StringCmd, len(provs))
	for i, p := range provs {
		fmts[i] = pipe.Get(ctx, q.ProviderPrefix(p)+"format")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for i, c := range fmts {
		if v := c.Val(); c.Err() == nil && v != Format {
			return fmt.Errorf("%w: %s holds format %q, this build reads %q", ErrIncompatible, q.ProviderPrefix(provs[i]), v, Format)
		}
	}
	return nil
}

// Legacy counts the job records and DLQ entries left in the layouts
// before per-provider queues (all in one slot, "switchboard:{q:v1}:", or
// untagged, "switchboard:q:v1:"): this build does not read them, so a
// queue that was not drained before the switch holds jobs nobody serves
// (docs/fleet.md, "Moving to per-provider queues").
func (q *Queue) Legacy(ctx context.Context) (int64, error) {
	pipe := q.c.Pipeline()
	var cmds []*redis.IntCmd
	for _, ns := range []string{q.channels(), q.opts.Load().Prefix + "q:v1:"} {
		cmds = append(cmds, pipe.ZCard(ctx, ns+"jobs"), pipe.ZCard(ctx, ns+"dlq"))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}
