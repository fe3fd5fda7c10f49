package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"switchboard/internal/config"
	"switchboard/internal/dispatch"
	"switchboard/internal/idempotency"
	"switchboard/internal/queue"
	"switchboard/internal/server"
	"switchboard/internal/store"
)

// openQueue connects to cfg's queue namespace; a namespace in another
// format is an error, an unreachable Redis is not (the queue fails closed
// per request and recovers without a restart).
func openQueue(cfg *config.Config, log *slog.Logger) (*queue.Queue, error) {
	store.QuietDriver() // the CLI's queue commands open no store
	pool := max(64, 2*cfg.Queue.WorkerConcurrency)
	c, err := dialRedis(&cfg.Redis, pool)
	if err != nil {
		return nil, err
	}
	q := queue.New(c, queue.OptionsOf(&cfg.Queue))
	provs := slices.Sorted(maps.Keys(cfg.Providers))
	q.SetProviders(func() []string { return provs }) // a serving replica's plane reads its live config instead
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Redis.ConnectTimeout.D()+cfg.Redis.CommandTimeout.D())
	defer cancel()
	if err := q.Check(ctx); err != nil {
		if errors.Is(err, queue.ErrIncompatible) {
			c.Close()
			return nil, err
		}
		log.Warn("queue: redis does not answer yet; requests get 503 until it does", "error", err.Error())
		return q, nil
	}
	if n, err := q.Legacy(ctx); err == nil && n > 0 {
		log.Warn("queue: the single-slot queue of an earlier version still holds jobs this version does not serve; "+
			"drain it with that version (docs/fleet.md, \"Moving to per-provider queues\")", "jobs", n)
	}
	return q, nil
}

// startQueue starts distributed execution when queue.mode is redis; wait
// blocks until the worker drained. ok=false: refuse to start.
func startQueue(ctx context.Context, srv *server.Server, cfg *config.Config, roleName string, log *slog.Logger) (wait func(), ok bool) {
	role, err := dispatch.ParseRole(roleName)
	if err != nil {
		log.Error("bad --role / SWITCHBOARD_ROLE", "error", err.Error())
		return nil, false
	}
	if !cfg.Queue.Redis() {
		if roleName != "" && roleName != "all" {
			log.Warn("--role applies only with queue.mode: redis; serving every request here", "role", roleName)
		}
		return func() {}, true
	}
	q, err := openQueue(cfg, log)
	if err != nil {
		log.Error("cannot use the job queue", "error", err.Error())
		return nil, false
	}
	log.Info("distributed execution on", "ingress", role.Ingress, "worker", role.Worker, "namespace", queue.Namespace)
	return srv.StartQueue(ctx, q, role), true
}

// queueCmd is the operator's view of the shared queue.
func queueCmd(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("queue", stdout, stderr)
	path := fs.String("config", envOr("CONFIG_FILE", "config/config.yaml"),
		"config file naming redis.url (env CONFIG_FILE); without one, SWITCHBOARD_REDIS_URL alone will do")
	limit := fs.Int("limit", 100, "dlq list: at most this many entries")
	words, code, ok := fs.parseWords(args)
	if !ok {
		return code
	}
	valid := len(words) == 1 && words[0] == "stats" ||
		len(words) == 2 && words[0] == "dlq" && words[1] == "list" ||
		len(words) == 3 && words[0] == "dlq" && (words[1] == "show" || words[1] == "retry" || words[1] == "drop")
	if !valid {
		fs.usage(stderr)
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		// No file where none was named: the operator's shell may know the
		// fleet's Redis by SWITCHBOARD_REDIS_URL alone.
		env, ok := config.RedisFromEnvironment()
		if !ok || !errors.Is(err, os.ErrNotExist) || fs.given("config") || os.Getenv("CONFIG_FILE") != "" {
			fmt.Fprintln(stderr, err)
			return 1
		}
		cfg = env
		detectCluster(&cfg.Redis, stderr)
	}
	if !cfg.Redis.Enabled() {
		fmt.Fprintln(stderr, "the config has no redis.url (or SWITCHBOARD_REDIS_URL): there is no shared queue")
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	q, err := openQueue(cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer q.Client().Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := json.NewEncoder(stdout)
	out.SetIndent("", "  ")
	fail := func(err error) int {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	switch {
	case words[0] == "stats" && len(words) == 1:
		st, err := q.Stats(ctx)
		if err != nil {
			return fail(err)
		}
		_ = out.Encode(st)
		return 0
	case words[0] == "dlq" && len(words) == 2 && words[1] == "list":
		dead, err := q.DLQ(ctx, *limit)
		if err != nil {
			return fail(err)
		}
		_ = out.Encode(dead)
		return 0
	case words[0] == "dlq" && len(words) == 3:
		id := words[2]
		switch words[1] {
		case "show":
			d, err := q.DeadJob(ctx, id)
			if err != nil {
				return fail(err)
			}
			_ = out.Encode(d)
			return 0
		case "retry":
			if err := q.Retry(ctx, id); err != nil {
				return fail(err)
			}
			fmt.Fprintln(stdout, "retried", id)
			return 0
		case "drop":
			if err := q.Drop(ctx, id); err != nil {
				return fail(err)
			}
			fmt.Fprintln(stdout, "dropped", id)
			return 0
		}
	}
	fs.usage(stderr)
	return 2
}

// openIdempotency picks the Idempotency-Key store: Redis when the fleet
// shares Redis (the queue's client in queue mode), else the SQLite store's
// file, else memory.
func openIdempotency(cfg *config.Config, st store.Store) (idempotency.Store, func(), error) {
	lim := idempotency.LimitsOf(&cfg.Idempotency)
	if cfg.Redis.Enabled() {
		c, err := dialRedis(&cfg.Redis, 32)
		if err != nil {
			return nil, nil, err
		}
		return idempotency.NewRedis(c, lim), func() { c.Close() }, nil
	}
	if db := store.SQLiteDB(st); db != nil {
		s, err := idempotency.NewSQLite(db, lim, nil)
		return s, func() {}, err
	}
	return idempotency.NewMemory(lim, nil), func() {}, nil
}

// detectCluster asks the node SWITCHBOARD_REDIS_URL names whether it is
// part of a Redis Cluster (INFO cluster), since a URL alone does not say
// so and a single-server client gets MOVED from a cluster node. Without an
// answer the URL is taken as one server, as before.
func detectCluster(r *config.Redis, stderr io.Writer) {
	if r.Cluster || r.Sentinel.Master != "" {
		return
	}
	c, err := dialRedis(r, 1)
	if err != nil {
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), r.ConnectTimeout.D()+r.CommandTimeout.D())
	defer cancel()
	info, err := c.Info(ctx, "cluster").Result()
	if err == nil && strings.Contains(info, "cluster_enabled:1") {
		r.Cluster = true
		fmt.Fprintln(stderr, "note: SWITCHBOARD_REDIS_URL names a Redis Cluster node; using it as a seed of the cluster")
	}
}
