package main

import (
	"context"
	"log/slog"
	"time"

	"switchboard/internal/alerts"
	"switchboard/internal/config"
	"switchboard/internal/server"
	"switchboard/internal/store"
	"switchboard/internal/tracing"
)

// startTracing gives srv its tracer when tracing: (or OTEL_*) turns it
// on; the returned stop exports what is queued, within 5 s. Call it
// before any request or job is served.
func startTracing(cfg *config.Config, srv *server.Server, log *slog.Logger) (stop func(), err error) {
	tr, err := tracing.New(cfg.Tracing, tracing.Options{Registerer: srv.Metrics.Registry, Log: log, Version: buildInfo().version})
	if err != nil || tr == nil {
		return func() {}, err
	}
	log.Info("tracing on", tracing.Describe(tracing.Resolve(cfg.Tracing, nil))...)
	srv.SetTracer(tr)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not exported at exit", "error", err.Error())
		}
	}, nil
}

// startAlerts runs srv's alert notifier until ctx ends. It always runs
// (alerts: may be set by a reload); its claims are shared where the
// store is: Redis for a fleet, else the SQLite file, else memory.
func startAlerts(ctx context.Context, cfg *config.Config, st store.Store, srv *server.Server, log *slog.Logger) (stop func(), err error) {
	o := alerts.Options{Log: log, Spend: srv.Admission, DLQ: srv.DLQSize, Record: srv.RecordAlert, Registerer: srv.Metrics.Registry}
	stop = func() {}
	switch db := store.SQLiteDB(st); {
	case cfg.Redis.Enabled():
		c, err := dialRedis(&cfg.Redis, 2)
		if err != nil {
			return nil, err
		}
		o.Claims, stop = alerts.RedisClaims{C: c}, func() { c.Close() }
	case db != nil:
		c, err := alerts.NewSQLiteClaims(db, nil)
		if err != nil {
			return nil, err
		}
		o.Claims = c
	}
	n := alerts.New(o)
	srv.SetAlerts(n)
	go n.Run(ctx)
	return stop, nil
}
