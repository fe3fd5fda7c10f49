package main

import (
	"log/slog"
	"path/filepath"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/server"
	"switchboard/internal/usagelog"
)

// usageLogPath is the usage log's file: usage_log.path, else
// STATE_DIR/usage.db.
func usageLogPath(cfg *config.Config, stateDir string) string {
	if cfg != nil && cfg.UsageLog.Path != "" {
		return cfg.UsageLog.Path
	}
	return filepath.Join(stateDir, usagelog.DefaultFile)
}

// openUsageLog opens the per-request usage log when usage_log.enabled
// (the default) and gives it to srv; the returned func writes what is
// queued and closes it.
func openUsageLog(cfg *config.Config, stateDir string, srv *server.Server, log *slog.Logger) (func(), error) {
	if !cfg.UsageLog.On() {
		return func() {}, nil
	}
	db, err := usagelog.Open(usageLogPath(cfg, stateDir))
	if err != nil {
		return nil, err
	}
	l := usagelog.NewLog(db, usagelog.Options{Clock: clock.Real{}, Retention: cfg.UsageLog.Retention.D(),
		Buffer: cfg.UsageLog.Buffer, Log: log, Registerer: srv.Metrics.Registry})
	srv.SetUsageLog(l)
	return func() {
		l.Close()
		db.Close()
	}, nil
}
