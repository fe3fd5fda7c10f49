package config

import "time"

// Queue selects distributed execution (see docs/queue.md).
type Queue struct {
	// Mode: off (default; every replica serves its own requests) or redis
	// (ingress replicas enqueue, worker replicas execute; needs redis.url).
	Mode string `yaml:"mode"`
	// Depth bounds waiting jobs per provider, fleet-wide and exactly.
	// Default 10000, range 1..10,000,000.
	Depth int `yaml:"depth"`
	// MaxDeliveries before a job goes to the dead-letter queue. Default 3,
	// range 1..100.
	MaxDeliveries int `yaml:"max_deliveries"`
	// Lease is how long a delivery lives without a heartbeat (Redis
	// time). Default 15 s, range 1 s..600 s. Heartbeats run every third.
	Lease Duration `yaml:"lease"`
	// OriginLease is how long a job outlives a silent origin (the replica
	// holding the client). Default 15 s, range 1 s..300 s.
	OriginLease Duration `yaml:"origin_lease"`
	// WorkerConcurrency bounds jobs one worker replica runs at once.
	// Default 64, range 1..100,000.
	WorkerConcurrency int `yaml:"worker_concurrency"`
	// RetainedJobs bounds job records of every state, per provider queue
	// (each provider's queue is its own Redis slot and keeps its own
	// accounting; the fleet holds up to this times the providers).
	// Default 10000, range 1..10,000,000.
	RetainedJobs int `yaml:"retained_jobs"`
	// RetainedBaseBytes bounds request and metadata bytes, per provider
	// queue. Default 512 MiB, range 1 MiB..64 GiB.
	RetainedBaseBytes int64 `yaml:"retained_base_bytes"`
	// RetainedTerminalBytes bounds stored results, reservations included,
	// per provider queue. Default 512 MiB, range 1 MiB..64 GiB.
	RetainedTerminalBytes int64 `yaml:"retained_terminal_bytes"`
	// UnaryTerminalBytes is reserved per unary job before dispatch; a
	// larger result becomes a fixed-size error. Default 64 MiB, range
	// 4 KiB..1 GiB.
	UnaryTerminalBytes int64 `yaml:"unary_terminal_bytes"`
	// StreamTerminalBytes is reserved per streamed job (its final state).
	// Default 128 KiB, range 4 KiB..64 MiB.
	StreamTerminalBytes int64 `yaml:"stream_terminal_bytes"`
	// ResultTTL keeps a finished job readable for an origin that lost the
	// notice. Default 60 s, range 1 s..86400 s.
	ResultTTL Duration `yaml:"result_ttl"`
	// DLQMax, DLQBytes and DLQTTL bound each provider queue's dead-letter
	// queue. Defaults
	// 1000 entries, 64 MiB, 24 h; ranges 1..1,000,000, 1 MiB..16 GiB,
	// 1 m..30 d.
	DLQMax   int      `yaml:"dlq_max"`
	DLQBytes int64    `yaml:"dlq_bytes"`
	DLQTTL   Duration `yaml:"dlq_ttl"`
}

// Redis reports whether distributed execution is on.
func (q *Queue) Redis() bool { return q.Mode == QueueRedis }

// Idempotency configures Idempotency-Key handling (both queue modes).
type Idempotency struct {
	// TTL keeps a stored answer. Default 24 h, range 1 s..7 d.
	TTL Duration `yaml:"ttl"`
	// MaxEntries bounds stored answers: the process's in memory or
	// SQLite, each tenant's on Redis (a tenant's records share its
	// Cluster slot, which keeps their accounting). Default 100000, range
	// 1..10,000,000.
	MaxEntries int `yaml:"max_entries"`
	// MaxBytes bounds one stored answer; a larger one is not stored (a
	// repeat runs again). Default 1 MiB, range 1 KiB..64 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxTotalBytes bounds all stored answers, as MaxEntries does (each
	// tenant's on Redis). Default 256 MiB, range 1 MiB..64 GiB.
	MaxTotalBytes int64 `yaml:"max_total_bytes"`
	// Lease is how long the first request with a key holds its claim
	// without renewing it; a running request renews it every third of
	// it, so a claim whose owner crashed lapses within a lease and a
	// retry runs. Default 10 s, range 1 s..10 min; applies on reload.
	Lease Duration `yaml:"lease"`
}

// Queue modes.
const (
	QueueOff   = "off"
	QueueRedis = "redis"
)

// QueueDefaults is the queue section with every field at its default:
// the one place the queue's defaults are written. Load fills each
// omitted field from it, and the queue package takes a bound left at zero
// from it.
func QueueDefaults() Queue {
	return Queue{Mode: QueueOff, Depth: 10_000, MaxDeliveries: 3, Lease: Duration(15 * time.Second),
		OriginLease: Duration(15 * time.Second), WorkerConcurrency: 64, RetainedJobs: 10_000,
		RetainedBaseBytes: 512 * mib, RetainedTerminalBytes: 512 * mib, UnaryTerminalBytes: 64 * mib,
		StreamTerminalBytes: 128 * 1024, ResultTTL: Duration(time.Minute), DLQMax: 1000, DLQBytes: 64 * mib,
		DLQTTL: Duration(24 * time.Hour)}
}

func (l *loader) queueDefaults(c *Config) {
	q, d := &c.Queue, QueueDefaults()
	setDefault(l, "queue.mode", &q.Mode, d.Mode)
	setDefault(l, "queue.depth", &q.Depth, d.Depth)
	setDefault(l, "queue.max_deliveries", &q.MaxDeliveries, d.MaxDeliveries)
	setDefault(l, "queue.lease", &q.Lease, d.Lease)
	setDefault(l, "queue.origin_lease", &q.OriginLease, d.OriginLease)
	setDefault(l, "queue.worker_concurrency", &q.WorkerConcurrency, d.WorkerConcurrency)
	setDefault(l, "queue.retained_jobs", &q.RetainedJobs, d.RetainedJobs)
	setDefault(l, "queue.retained_base_bytes", &q.RetainedBaseBytes, d.RetainedBaseBytes)
	setDefault(l, "queue.retained_terminal_bytes", &q.RetainedTerminalBytes, d.RetainedTerminalBytes)
	setDefault(l, "queue.unary_terminal_bytes", &q.UnaryTerminalBytes, d.UnaryTerminalBytes)
	setDefault(l, "queue.stream_terminal_bytes", &q.StreamTerminalBytes, d.StreamTerminalBytes)
	setDefault(l, "queue.result_ttl", &q.ResultTTL, d.ResultTTL)
	setDefault(l, "queue.dlq_max", &q.DLQMax, d.DLQMax)
	setDefault(l, "queue.dlq_bytes", &q.DLQBytes, d.DLQBytes)
	setDefault(l, "queue.dlq_ttl", &q.DLQTTL, d.DLQTTL)

	i := &c.Idempotency
	setDefault(l, "idempotency.ttl", &i.TTL, Duration(24*time.Hour))
	setDefault(l, "idempotency.max_entries", &i.MaxEntries, 100_000)
	setDefault(l, "idempotency.max_bytes", &i.MaxBytes, mib)
	setDefault(l, "idempotency.max_total_bytes", &i.MaxTotalBytes, 256*mib)
	setDefault(l, "idempotency.lease", &i.Lease, Duration(10*time.Second))
}

func (l *loader) validateQueue(c *Config) {
	q := &c.Queue
	l.oneOf("queue.mode", q.Mode, []string{QueueOff, QueueRedis})
	if q.Mode == QueueRedis && !c.Redis.Enabled() {
		l.errAt("queue.mode", "redis needs redis.url (or %s)", EnvRedisURL)
	}
	const gib = 1024 * mib
	l.intRange("queue.depth", int64(q.Depth), 1, 10_000_000)
	l.intRange("queue.max_deliveries", int64(q.MaxDeliveries), 1, 100)
	l.durRange("queue.lease", q.Lease, time.Second, 10*time.Minute)
	l.durRange("queue.origin_lease", q.OriginLease, time.Second, 5*time.Minute)
	l.intRange("queue.worker_concurrency", int64(q.WorkerConcurrency), 1, 100_000)
	l.intRange("queue.retained_jobs", int64(q.RetainedJobs), 1, 10_000_000)
	l.intRange("queue.retained_base_bytes", q.RetainedBaseBytes, mib, 64*gib)
	l.intRange("queue.retained_terminal_bytes", q.RetainedTerminalBytes, mib, 64*gib)
	l.intRange("queue.unary_terminal_bytes", q.UnaryTerminalBytes, 4096, gib)
	l.intRange("queue.stream_terminal_bytes", q.StreamTerminalBytes, 4096, 64*mib)
	l.durRange("queue.result_ttl", q.ResultTTL, time.Second, 24*time.Hour)
	l.intRange("queue.dlq_max", int64(q.DLQMax), 1, 1_000_000)
	l.intRange("queue.dlq_bytes", q.DLQBytes, mib, 16*gib)
	l.durRange("queue.dlq_ttl", q.DLQTTL, time.Minute, 30*24*time.Hour)
	if q.UnaryTerminalBytes > q.RetainedTerminalBytes {
		l.errAt("queue.unary_terminal_bytes", "must not exceed queue.retained_terminal_bytes (%d)", q.RetainedTerminalBytes)
	}

	i := &c.Idempotency
	l.durRange("idempotency.ttl", i.TTL, time.Second, 7*24*time.Hour)
	l.intRange("idempotency.max_entries", int64(i.MaxEntries), 1, 10_000_000)
	l.intRange("idempotency.max_bytes", i.MaxBytes, 1024, 64*mib)
	l.intRange("idempotency.max_total_bytes", i.MaxTotalBytes, mib, 64*gib)
	l.durRange("idempotency.lease", i.Lease, time.Second, 10*time.Minute)
}
