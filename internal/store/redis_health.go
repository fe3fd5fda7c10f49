package store

import (
	"context"
	"errors"

	"switchboard/internal/health"
)

// Health returns the fleet-wide provider health backend over this store's
// connection (redis_health.lua, redis_health_fetch.lua). While Redis is
// unavailable its calls fail at once and the registry goes on with what
// its own process saw: health fails open, like rates.
func (r *Redis) Health() health.Shared { return redisHealth{r} }

type redisHealth struct{ r *Redis }

var eventKinds = map[health.EventKind]string{health.Opened: "open", health.Closed: "close", health.Paused: "pause"}

// Publish implements health.Shared.
func (h redisHealth) Publish(ctx context.Context, name string, e health.Event) (int64, error) {
	kind, ok := eventKinds[e.Kind]
	if !ok {
		return 0, errors.New("health: unknown event")
	}
	v, err := h.r.run(ctx, scriptHealth, []string{healthKey(name)}, kind, i64(max(e.Pause.Microseconds(), 0)),
		e.Reason, i64(max(e.TTL.Milliseconds(), 1)))
	if err != nil {
		return 0, err
	}
	n, ok := ints(v)
	if !ok || len(n) != 2 {
		return 0, errors.New("health publish reply: malformed")
	}
	return n[0], nil
}

// Fetch implements health.Shared.
func (h redisHealth) Fetch(ctx context.Context, names []string) (map[string]health.Record, error) {
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = healthKey(n)
	}
	v, err := h.fetch(ctx, keys)
	if err != nil {
		return nil, err
	}
	xs, ok := v.([]any)
	if !ok || len(xs) != len(names)+1 {
		return nil, errors.New("health fetch reply: malformed")
	}
	now, ok := xs[0].(int64)
	if !ok {
		return nil, errors.New("health fetch reply: no time")
	}
	out := make(map[string]health.Record, len(names))
	for i, name := range names {
		f, ok := xs[i+1].([]any)
		if !ok || len(f) != 4 {
			return nil, errors.New("health fetch reply: malformed record")
		}
		o, ok1 := f[0].(int64)
		c, ok2 := f[1].(int64)
		p, ok3 := f[2].(int64)
		reason, ok4 := f[3].(string)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, errors.New("health fetch reply: malformed field")
		}
		if o == 0 && c == 0 && p <= now {
			continue
		}
		out[name] = health.Record{Open: o, Close: c, OpenAge: us(now - o), CloseAge: us(now - c),
			PauseLeft: max(us(p-now), 0), Reason: reason}
	}
	return out, nil
}

// fetch runs redis_health_fetch.lua over keys: in one call, or in a
// cluster one per provider (each in its own slot), sent together, their
// replies joined as one.
func (h redisHealth) fetch(ctx context.Context, keys []string) (any, error) {
	if !h.r.cluster || len(keys) < 2 {
		return h.r.run(ctx, scriptHealthFetch, keys)
	}
	if h.r.down.Load() {
		return nil, ErrUnavailable
	}
	calls := make([]*call, len(keys))
	for i, k := range keys {
		calls[i] = &call{script: scriptHealthFetch, cmd: []any{"evalsha", &scriptHealthFetch.sha, 1, k}}
	}
	cctx, cancel := h.r.cmdCtx(ctx)
	defer cancel()
	h.r.p.doAll(cctx, calls)
	out := make([]any, 1, len(keys)+1)
	for _, c := range calls {
		if c.err != nil {
			return nil, c.err
		}
		xs, ok := c.v.([]any)
		if !ok || len(xs) != 2 {
			return nil, errors.New("health fetch reply: malformed")
		}
		// The servers' clocks differ by little; the earliest keeps ages
		// from reading short.
		if n, ok := xs[0].(int64); ok {
			if m, ok := out[0].(int64); !ok || n < m {
				out[0] = n
			}
		}
		out = append(out, xs[1])
	}
	return out, nil
}
