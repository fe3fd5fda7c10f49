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

	t := &c.Timeouts
	setDefault(l, "timeouts.open", &t.Open, Duration(30*time.Second))
	setDefault(l, "timeouts.read", &t.Read, Duration(300*time.Second))
	setDefault(l, "timeouts.write", &t.Write, Duration(60*time.Second))
	setDefault(l, "timeouts.request", &t.Request, Duration(600*time.Second))
	setDefault(l, "timeouts.shutdown", &t.Shutdown, Duration(30*time.Second))

	r := &c.Retries
	setDefault(l, "retries.max_attempts", &r.MaxAttempts, 3)
	setDefault(l, "retries.backoff_base", &r.BackoffBase, Duration(2*time.Second))
	setDefault(l, "retries.max_rounds", &r.MaxRounds, 3)
	setDefault(l, "retries.max_backoff", &r.MaxBackoff, Duration(60*time.Second))
	setDefault(l, "retries.on_429", &r.On429, On429Pause)

	setDefault(l, "logging.level", &c.Logging.Level, "info")
	setDefault(l, "logging.format", &c.Logging.Format, "text")

	tl := &c.Metrics.TPSLog
	if tl.Interval == nil {
		tl.Interval = durPtr(5 * time.Second)
	}
	setDefault(l, "metrics.tps_log.activity_window", &tl.ActivityWindow, Duration(10*time.Second))
	setDefault(l, "metrics.tps_log.eval_window", &tl.EvalWindow, Duration(60*time.Second))
	if tl.MinTokens == nil {
		tl.MinTokens = intPtr(500)
	}

	p := &c.Performance
	setDefault(l, "performance.probe_interval", &p.ProbeInterval, 3)
	setDefault(l, "performance.connection_max_age", &p.ConnectionMaxAge, Duration(300*time.Second))
	setDefault(l, "performance.sample_window", &p.SampleWindow, Duration(300*time.Second))
	if p.ConfigPollInterval == nil {
		p.ConfigPollInterval = durPtr(2 * time.Second)
	}
	setDefault(l, "performance.quota_pause_default_seconds", &p.QuotaPauseDefaultSeconds, 60)

	setDefault(l, "limits.max_request_body", &c.Limits.MaxRequestBody, defaultMaxRequestBody)
	setDefault(l, "limits.max_concurrency", &c.Limits.MaxConcurrency, defaultMaxConcurrency)
	setDefault(l, "limits.queue_timeout", &c.Limits.QueueTimeout, Duration(defaultQueueTimeout))
	setDefault(l, "limits.penalty_seconds", &c.Limits.PenaltySeconds, defaultPenaltySeconds)
	setDefault(l, "limits.advisory_prefix", &c.Limits.AdvisoryPrefix, DefaultAdvisoryPrefix)
	setDefault(l, "limits.window", &c.Limits.Window, Windows{RPM: WindowBucket, TPM: WindowBucket})
	setDefault(l, "limits.body_timeout", &c.Limits.BodyTimeout, Duration(defaultBodyTimeout))
	setDefault(l, "limits.max_buffered_bytes", &c.Limits.MaxBufferedBytes, defaultMaxBufferedBytes)
	setDefault(l, "limits.tenant_counting", &c.Limits.TenantCounting, CountRequests)
	setDefault(l, "store.backend", &c.Store.Backend, StoreSQLite)
	setDefault(l, "config.unknown_fields", &c.Config.UnknownFields, UnknownStrict)
	setDefault(l, "spend.max_retained_attempts", &c.Spend.MaxRetainedAttempts, defaultMaxRetainedAttempts)
	l.applyEnvAliases(c)
	setDefault(l, "redis.command_timeout", &c.Redis.CommandTimeout, Duration(defaultRedisCommandTimeout))
	setDefault(l, "redis.connect_timeout", &c.Redis.ConnectTimeout, Duration(defaultRedisConnectTimeout))

	b := &c.Health.Breaker
	if b.Threshold == nil {
		b.Threshold = intPtr(3)
	}
	setDefault(l, "health.breaker.window", &b.Window, Duration(60*time.Second))
	setDefault(l, "health.breaker.cooldown", &b.Cooldown, Duration(60*time.Second))

	for name, pr := range c.Providers {
		base := "providers." + name
		pr.Name = name
		setDefault(l, base+".type", &pr.Type, TypeOpenAI)
		l.cloudDefaults(base, pr)
		if pr.Mock == nil && pr.Type == TypeMock {
			pr.Mock = &Mock{}
		}
		if pr.Mock != nil {
			setDefault(l, base+".mock.tokens", &pr.Mock.Tokens, defaultMockTokens)
			setDefault(l, base+".mock.fail_status", &pr.Mock.FailStatus, defaultMockFailStatus)
		}
	}

	for i, m := range c.Models {
		for j, mp := range m.Providers {
			setDefault(l, modelPath(i)+providerPath(j)+".model", &mp.Model, m.Name)
		}
	}
}

func durPtr(d time.Duration) *Duration { v := Duration(d); return &v }
func intPtr(i int) *int                { return &i }

// setDefault gives *p its default v when the file omits path (or gives
// null); an explicit zero stays, to be validated.
func setDefault[T any](l *loader, path string, p *T, v T) {
	if !l.has(path) {
		*p = v
	}
}
