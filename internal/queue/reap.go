package queue

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// Reaped counts one reaper pass's work. Canceled counts jobs whose origin
// went silent and jobs whose worker was lost after their stream reached
// the client (never rerun).
type Reaped struct{ Requeued, Dead, Canceled, Reclaimed int }

func (r *Reaped) add(o Reaped) {
	r.Requeued += o.Requeued
	r.Dead += o.Dead
	r.Canceled += o.Canceled
	r.Reclaimed += o.Reclaimed
}

// Reap runs one bounded pass (see reap.lua) over every provider queue,
// one script each, each bounded by the operation timeout. Any replica may
// run it; each step is atomic, so concurrent reapers never double-handle
// a job. A queue that failed does not keep the others from being reaped;
// the first error is returned with what the others did. A queue of a
// provider this replica's config does not name leaves the directory once
// it holds no job and no DLQ entry.
func (q *Queue) Reap(ctx context.Context) (Reaped, error) {
	lctx, cancel := context.WithTimeout(ctx, q.OpTimeout())
	provs, err := q.providers(lctx, true)
	cancel()
	if err != nil {
		return Reaped{}, err
	}
	conf := q.configuredProviders()
	var sum Reaped
	var first error
	for _, p := range provs {
		rctx, cancel := context.WithTimeout(ctx, q.OpTimeout())
		r, held, err := q.reapOne(rctx, p)
		if err == nil && held == 0 && !slices.Contains(conf, p) {
			err = q.c.SRem(rctx, q.directory(), p).Err()
			q.listed.Delete(p)
		}
		cancel()
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		sum.add(r)
	}
	return sum, first
}

// reapOne reaps prov's queue; held is how many job records and DLQ
// entries it still holds.
func (q *Queue) reapOne(ctx context.Context, prov string) (r Reaped, held int64, err error) {
	o := q.opts.Load()
	res, err := q.run(ctx, scriptReap, prov, reapBatch, o.MaxDeliveries, o.ResultTTL.Milliseconds(),
		o.DLQMax, o.DLQBytes, o.DLQTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return Reaped{}, 0, err
	}
	if len(res) < 6 {
		return Reaped{}, 0, fmt.Errorf("reap: unexpected reply %v", res)
	}
	return Reaped{int(res[0]), int(res[1]), int(res[2]), int(res[3])}, res[4] + res[5], nil
}

// Channel names.
func (q *Queue) originChannel(origin string) string { return q.channels() + "o:" + origin }
func (q *Queue) workerChannel(worker string) string { return q.channels() + "wk:" + worker }
func (q *Queue) wakeChannel() string                { return q.channels() + "wake" }

// Reaper runs Reap every interval until ctx ends, reporting each pass
// that did something.
func (q *Queue) Reaper(ctx context.Context, interval time.Duration, log *slog.Logger, report func(Reaped)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r, err := q.Reap(ctx)
		if err != nil && ctx.Err() == nil {
			log.Debug("queue: reaper pass failed", "error", err.Error())
		}
		if r != (Reaped{}) && report != nil {
			report(r)
		}
	}
}
