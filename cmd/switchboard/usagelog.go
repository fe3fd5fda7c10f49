package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

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
// (the default) and gives it to srv; in a fleet (redis.url) it also
// publishes to, and drains, the fleet's usage stream. The returned func
// writes what is queued and closes everything.
func openUsageLog(cfg *config.Config, stateDir string, srv *server.Server, log *slog.Logger) (func(), error) {
	if !cfg.UsageLog.On() {
		return func() {}, nil
	}
	db, err := usagelog.Open(usageLogPath(cfg, stateDir))
	if err != nil {
		return nil, err
	}
	var fleet *usagelog.Fleet
	closeFleet := func() {}
	if cfg.Redis.Enabled() {
		c, err := dialRedis(&cfg.Redis, 4)
		if err != nil {
			db.Close()
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		fleet, err = usagelog.NewFleet(ctx, c, db, usagelog.FleetOptions{CommandTimeout: cfg.Redis.CommandTimeout.D(), Log: log})
		cancel()
		if err != nil {
			c.Close()
			db.Close()
			return nil, err
		}
		closeFleet = func() {
			fleet.Close()
			c.Close()
		}
	}
	l := usagelog.NewLog(db, usagelog.Options{Clock: clock.Real{}, Retention: cfg.UsageLog.Retention.D(),
		Buffer: cfg.UsageLog.Buffer, Log: log, Registerer: srv.Metrics.Registry, Fleet: fleet})
	srv.SetUsageLog(l)
	return func() {
		l.Close()
		closeFleet()
		db.Close()
	}, nil
}
