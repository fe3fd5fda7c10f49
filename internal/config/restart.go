package config

import "reflect"

// RestartNeeded names the fields that differ between a running config and
// a reloaded one but are read only at boot, so the reload cannot apply
// them: the log format (the handler is built once), and where state lives
// (store.*, redis.*: the store is opened once). Everything else, including
// timeouts.open/read/write, performance.connection_max_age and
// performance.config_poll_interval, applies on reload.
func RestartNeeded(old, next *Config) []string {
	if old == nil || next == nil {
		return nil
	}
	var out []string
	check := func(name string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			out = append(out, name)
		}
	}
	check("logging.format", old.Logging.Format, next.Logging.Format)
	check("store.backend", old.Store.Backend, next.Store.Backend)
	check("store.path", old.Store.Path, next.Store.Path)
	check("redis.url", old.Redis.URL, next.Redis.URL)
	check("redis.command_timeout", old.Redis.CommandTimeout, next.Redis.CommandTimeout)
	check("redis.connect_timeout", old.Redis.ConnectTimeout, next.Redis.ConnectTimeout)
	check("redis.cluster", old.Redis.Cluster, next.Redis.Cluster)
	check("redis.seeds", old.Redis.Seeds, next.Redis.Seeds)
	check("redis.sentinel", old.Redis.Sentinel, next.Redis.Sentinel)
	// The queue's mode, its worker pool and the idempotency store are set
	// up at boot; the other queue.* bounds apply on reload.
	check("queue.mode", old.Queue.Mode, next.Queue.Mode)
	check("queue.worker_concurrency", old.Queue.WorkerConcurrency, next.Queue.WorkerConcurrency)
	oi, ni := old.Idempotency, next.Idempotency
	oi.Lease, ni.Lease = 0, 0 // read per request
	check("idempotency", oi, ni)
	// The usage log's file and queue are set up at boot; its retention
	// applies on reload.
	check("usage_log.enabled", old.UsageLog.On(), next.UsageLog.On())
	check("usage_log.path", old.UsageLog.Path, next.UsageLog.Path)
	check("usage_log.buffer", old.UsageLog.Buffer, next.UsageLog.Buffer)
	// The tracer is built once, at boot.
	check("tracing", old.Tracing, next.Tracing)
	// The cache's store and semantic index are opened at boot; its other
	// settings apply on reload.
	check("cache.store", old.Cache.Store, next.Cache.Store)
	check("cache.path", old.Cache.Path, next.Cache.Path)
	check("cache.semantic.max_entries", semanticMax(old), semanticMax(next))
	return out
}

// semanticMax is cache.semantic.max_entries (its default without a
// global semantic section).
func semanticMax(c *Config) int {
	if c.Cache.Semantic == nil {
		return DefaultSemanticMaxEntries
	}
	return c.Cache.Semantic.MaxEntries
}
