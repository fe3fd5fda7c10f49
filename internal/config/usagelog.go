package config

import "time"

// UsageLog configures the per-request usage log (one row per request, no
// prompt or answer text; see internal/usagelog).
type UsageLog struct {
	// Enabled: default true (the file lives in STATE_DIR beside the
	// provider state); false records nothing and the admin usage
	// endpoints answer 404 usage_log_disabled.
	Enabled *bool `yaml:"enabled"`
	// Path of the SQLite file. Default STATE_DIR/usage.db.
	Path string `yaml:"path"`
	// Retention keeps rows this long, then they are pruned in batches.
	// Default 30 d (720h), range 1 h..3650 d.
	Retention Duration `yaml:"retention"`
	// Buffer bounds the rows queued for the writer; when full, rows are
	// dropped and counted (switchboard_usage_log_rows_total{outcome=
	// "dropped"}) rather than holding a request. Default 10,000, range
	// 1..10,000,000.
	Buffer int `yaml:"buffer"`
}

// On reports whether the usage log is enabled (default true).
func (u UsageLog) On() bool { return u.Enabled == nil || *u.Enabled }

func (l *loader) usageLogDefaults(c *Config) {
	u := &c.UsageLog
	setDefault(l, "usage_log.retention", &u.Retention, Duration(30*24*time.Hour))
	setDefault(l, "usage_log.buffer", &u.Buffer, 10_000)
}

func (l *loader) validateUsageLog(c *Config) {
	u := &c.UsageLog
	l.durRange("usage_log.retention", u.Retention, time.Hour, 3650*24*time.Hour)
	l.intRange("usage_log.buffer", int64(u.Buffer), 1, 10_000_000)
}
