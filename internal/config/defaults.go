package config

import "time"

// Defaults. A field gets its default only when the file omits it (or gives
// null), never because its value is zero: an explicit 0 is validated, not
// silently replaced.
const (
	defaultMaxRequestBody      = 10 << 20
	defaultMockTokens          = 16
	defaultMockFailStatus      = 500
	defaultMaxConcurrency      = 256
	defaultQueueTimeout        = 5 * time.Second
	defaultPenaltySeconds      = 5
	defaultBodyTimeout         = 30 * time.Second
	defaultMaxBufferedBytes    = 512 << 20
	defaultMaxRetainedAttempts = 100000
	// DefaultBudgetWindowSecs is budget_window_secs when a key omits it.
	DefaultBudgetWindowSecs = 86400

	defaultRedisCommandTimeout = 500 * time.Millisecond
	defaultRedisConnectTimeout = time.Second
	// EnvRedisURL sets or overrides redis.url.
	EnvRedisURL = "SWITCHBOARD_REDIS_URL"

	// StoreSQLite and StoreMemory are the store.backend values.
	StoreSQLite = "sqlite"
	StoreMemory = "memory"
)

func (l *loader) applyDefaults(c *Config) {
	dur := func(path string, d *Duration, v time.Duration) {
		if !l.has(path) {
			*d = Duration(v)
		}
	}
	num := func(path string, i *int, v int) {
		if !l.has(path) {
			*i = v
		}
	}
	str := func(path string, s *string, v string) {
		if !l.has(path) {
			*s = v
		}
	}

	t := &c.Timeouts
	dur("timeouts.open", &t.Open, 30*time.Second)
	dur("timeouts.read", &t.Read, 300*time.Second)
	dur("timeouts.write", &t.Write, 60*time.Second)
	dur("timeouts.request", &t.Request, 600*time.Second)
	dur("timeouts.shutdown", &t.Shutdown, 30*time.Second)

	r := &c.Retries
	num("retries.max_attempts", &r.MaxAttempts, 3)
	dur("retries.backoff_base", &r.BackoffBase, 2*time.Second)
	num("retries.max_rounds", &r.MaxRounds, 3)
	dur("retries.max_backoff", &r.MaxBackoff, 60*time.Second)
	str("retries.on_429", &r.On429, On429Pause)

	str("logging.level", &c.Logging.Level, "info")
	str("logging.format", &c.Logging.Format, "text")

	tl := &c.Metrics.TPSLog
	if tl.Interval == nil {
		tl.Interval = durPtr(5 * time.Second)
	}
	dur("metrics.tps_log.activity_window", &tl.ActivityWindow, 10*time.Second)
	dur("metrics.tps_log.eval_window", &tl.EvalWindow, 60*time.Second)
	if tl.MinTokens == nil {
		tl.MinTokens = intPtr(500)
	}

	p := &c.Performance
	num("performance.probe_interval", &p.ProbeInterval, 3)
	dur("performance.connection_max_age", &p.ConnectionMaxAge, 300*time.Second)
	dur("performance.sample_window", &p.SampleWindow, 300*time.Second)
	if p.ConfigPollInterval == nil {
		p.ConfigPollInterval = durPtr(2 * time.Second)
	}
	num("performance.quota_pause_default_seconds", &p.QuotaPauseDefaultSeconds, 60)

	if !l.has("limits.max_request_body") {
		c.Limits.MaxRequestBody = defaultMaxRequestBody
	}
	num("limits.max_concurrency", &c.Limits.MaxConcurrency, defaultMaxConcurrency)
	dur("limits.queue_timeout", &c.Limits.QueueTimeout, defaultQueueTimeout)
	num("limits.penalty_seconds", &c.Limits.PenaltySeconds, defaultPenaltySeconds)
	str("limits.advisory_prefix", &c.Limits.AdvisoryPrefix, DefaultAdvisoryPrefix)
	if !l.has("limits.window") {
		c.Limits.Window = Windows{RPM: WindowBucket, TPM: WindowBucket}
	}
	dur("limits.body_timeout", &c.Limits.BodyTimeout, defaultBodyTimeout)
	if !l.has("limits.max_buffered_bytes") {
		c.Limits.MaxBufferedBytes = defaultMaxBufferedBytes
	}
	str("store.backend", &c.Store.Backend, StoreSQLite)
	str("config.unknown_fields", &c.Config.UnknownFields, UnknownStrict)
	num("spend.max_retained_attempts", &c.Spend.MaxRetainedAttempts, defaultMaxRetainedAttempts)
	l.applyEnvAliases(c)
	dur("redis.command_timeout", &c.Redis.CommandTimeout, defaultRedisCommandTimeout)
	dur("redis.connect_timeout", &c.Redis.ConnectTimeout, defaultRedisConnectTimeout)

	b := &c.Health.Breaker
	if b.Threshold == nil {
		b.Threshold = intPtr(3)
	}
	dur("health.breaker.window", &b.Window, 60*time.Second)
	dur("health.breaker.cooldown", &b.Cooldown, 60*time.Second)

	for name, pr := range c.Providers {
		base := "providers." + name
		pr.Name = name
		str(base+".type", &pr.Type, TypeOpenAI)
		if pr.Mock == nil && pr.Type == TypeMock {
			pr.Mock = &Mock{}
		}
		if pr.Mock != nil {
			num(base+".mock.tokens", &pr.Mock.Tokens, defaultMockTokens)
			num(base+".mock.fail_status", &pr.Mock.FailStatus, defaultMockFailStatus)
		}
	}

	for i, m := range c.Models {
		for j, mp := range m.Providers {
			str(modelPath(i)+providerPath(j)+".model", &mp.Model, m.Name)
		}
	}
}

func durPtr(d time.Duration) *Duration { v := Duration(d); return &v }
func intPtr(i int) *int                { return &i }
