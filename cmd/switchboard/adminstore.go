package main

import (
	"context"
	"log/slog"

	"switchboard/internal/admin"
	"switchboard/internal/config"
	"switchboard/internal/server"
	"switchboard/internal/store"
)

// openAdminStore picks where the admin API keeps issued keys and tenants:
// Redis when the fleet shares it (every replica follows its changes), else
// the SQLite store's file, else memory (lost at exit). It loads them into
// srv's key table; Redis being down at boot is logged, and the keys appear
// once it answers.
func openAdminStore(ctx context.Context, cfg *config.Config, st store.Store, srv *server.Server, log *slog.Logger) (follow bool, closeFn func(), err error) {
	var as admin.Store
	closeFn = func() {}
	switch db := store.SQLiteDB(st); {
	case cfg.Redis.Enabled():
		c, err := dialRedis(&cfg.Redis, 8)
		if err != nil {
			return false, nil, err
		}
		as, follow, closeFn = admin.NewRedis(c), true, func() { c.Close() }
	case db != nil:
		s, err := admin.NewSQLite(db)
		if err != nil {
			return false, nil, err
		}
		as = s
	default:
		s, err := admin.OpenMemory()
		if err != nil {
			return false, nil, err
		}
		as = s
	}
	if err := srv.SetAdminStore(ctx, as); err != nil {
		if !follow {
			closeFn()
			return false, nil, err
		}
		log.Warn("admin: cannot read issued keys from redis yet; they apply once it answers", "error", err.Error())
	}
	return follow, closeFn, nil
}
