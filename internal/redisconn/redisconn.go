// Package redisconn builds the one kind of Redis client every shared
// store uses (admission and spend, health, the queue, idempotency, the
// admin records, the usage stream): a single server, a Redis Cluster (or
// a Valkey cluster), or a primary found through Sentinel, all behind
// go-redis's UniversalClient, with the same bounded, never-replayed
// commands.
//
// A command whose reply was lost may have run, so none is sent twice:
// retries are off, and a cluster client, which follows MOVED and ASK
// redirects (the command did not run there), is kept from resending a
// command after a transport error by a hook on every node (see
// noReplay). A cluster's topology is reloaded when a command fails, so a
// replica promoted after its master died is found without a restart.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Options say where Redis is and how long each wait may take.
type Options struct {
	// URL: redis://, rediss:// or unix://. With Cluster it is one seed;
	// with a sentinel master it carries the user, password, database and
	// TLS choice of the primary (its host is unused).
	URL string
	// Cluster: a Redis Cluster, discovered from URL's host and Seeds.
	Cluster bool
	Seeds   []string
	// SentinelMaster and SentinelAddrs find the primary through Sentinel.
	SentinelMaster   string
	SentinelAddrs    []string
	SentinelPassword string
	// CommandTimeout bounds each command with its reply; ConnectTimeout a
	// new connection. Both must be positive.
	CommandTimeout, ConnectTimeout time.Duration
	// PoolSize is the connections per server (0: go-redis's default).
	PoolSize int
}

// Kind names the topology, for logs.
func (o Options) Kind() string {
	switch {
	case o.Cluster:
		return "cluster"
	case o.SentinelMaster != "":
		return "sentinel"
	}
	return "single"
}

// stateReload bounds how stale a cluster client's slot map may get
// without an error to prompt a reload (go-redis's default is a minute).
const stateReload = 5 * time.Second

// Dial builds the client; it does not talk to Redis. A URL that does not
// parse is an error.
func Dial(o Options) (redis.UniversalClient, error) {
	ro, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	Quiet()
	// Retries off; dial, read, write and pool waits bounded; RESP2 and no
	// identity or maintenance handshakes keep a new connection to one
	// round trip of AUTH/SELECT at most.
	maint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	switch {
	case o.Cluster:
		if ro.DB != 0 {
			return nil, errors.New("redis url: a cluster has only database 0")
		}
		addrs := append([]string{ro.Addr}, o.Seeds...)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: ro.Username, Password: ro.Password,
			TLSConfig: ro.TLSConfig, MaxRedirects: 3, MaxRetries: -1, DialTimeout: o.ConnectTimeout, DialerRetries: 1,
			ReadTimeout: o.CommandTimeout, WriteTimeout: o.CommandTimeout, PoolTimeout: o.CommandTimeout,
			PoolSize: o.PoolSize, ContextTimeoutEnabled: true, Protocol: 2, DisableIdentity: true,
			DisableRoutingPolicies: true, MaintNotificationsConfig: maint, ClusterStateReloadInterval: stateReload})
		h := &noReplay{}
		c.AddHook(h.outer())
		c.OnNewNode(func(n *redis.Client) { n.AddHook(h) })
		return c, nil
	case o.SentinelMaster != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: o.SentinelMaster, SentinelAddrs: o.SentinelAddrs,
			SentinelPassword: o.SentinelPassword, Username: ro.Username, Password: ro.Password, DB: ro.DB,
			TLSConfig: ro.TLSConfig, MaxRetries: -1, DialTimeout: o.ConnectTimeout, DialerRetries: 1,
			ReadTimeout: o.CommandTimeout, WriteTimeout: o.CommandTimeout, PoolTimeout: o.CommandTimeout,
			PoolSize: o.PoolSize, ContextTimeoutEnabled: true, Protocol: 2, DisableIdentity: true}), nil
	}
	ro.MaxRetries = -1
	ro.DialTimeout = o.ConnectTimeout
	ro.DialerRetries = 1
	ro.ReadTimeout = o.CommandTimeout
	ro.WriteTimeout = o.CommandTimeout
	ro.PoolTimeout = o.CommandTimeout
	if o.PoolSize > 0 {
		ro.PoolSize = o.PoolSize
	}
	ro.ContextTimeoutEnabled = true
	ro.Protocol = 2
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = maint
	return redis.NewClient(ro), nil
}

// Reload asks a cluster client to read the slot map again (a master may
// have failed over); other clients need nothing.
func Reload(c redis.UniversalClient) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}

// Ping reaches every master of a cluster (a replica promoted in place of
// a dead one counts once the slot map names it), or the one server.
func Ping(ctx context.Context, c redis.UniversalClient) error {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return c.Ping(ctx).Err()
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() })
}

// ErrMayHaveRun is a command's error when its first send failed in
// transit and the cluster client would have sent it again: it may have
// run, so it is not resent.
var ErrMayHaveRun = errors.New("redis: the command's reply was lost (it may have run); not sent again")

// noReplay keeps a cluster client from resending a command after a
// transport error. As a node hook it marks each command whose send failed
// in transit (or whose pipeline did) and fails a later send of it; as the
// cluster's own hook (outer) it forgets the marks once the call returns.
// Redirects (MOVED, ASK) are error replies: the command did not run, and
// go-redis follows them. A dial that failed sent nothing and may be
// retried.
type noReplay struct{ sent sync.Map }

func (h *noReplay) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *noReplay) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if _, lost := h.sent.Load(cmd); lost {
			cmd.SetErr(ErrMayHaveRun)
			return ErrMayHaveRun
		}
		err := next(ctx, cmd)
		if inTransit(err) {
			h.sent.Store(cmd, struct{}{})
		}
		return err
	}
}

func (h *noReplay) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		send := make([]redis.Cmder, 0, len(cmds))
		for _, c := range cmds {
			if _, lost := h.sent.Load(c); lost {
				c.SetErr(ErrMayHaveRun)
			} else {
				send = append(send, c)
			}
		}
		if len(send) == 0 {
			return ErrMayHaveRun
		}
		err := next(ctx, send)
		// A pipeline that broke is resent whole, replies read or not:
		// every command of it may have run.
		if inTransit(err) {
			for _, c := range send {
				h.sent.Store(c, struct{}{})
			}
		}
		return err
	}
}

// outer forgets the marks of a call once it returned.
func (h *noReplay) outer() redis.Hook { return outerHook{h} }

type outerHook struct{ h *noReplay }

func (o outerHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (o outerHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		defer o.h.sent.Delete(cmd)
		return next(ctx, cmd)
	}
}
func (o outerHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		defer func() {
			for _, c := range cmds {
				o.h.sent.Delete(c)
			}
		}()
		return next(ctx, cmds)
	}
}

// inTransit: an error that is neither a reply from Redis nor a dial that
// never connected.
func inTransit(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		return false
	}
	var op *net.OpError
	return !(errors.As(err, &op) && op.Op == "dial")
}

// Quiet sends go-redis's own log lines to debug, once per process: it
// logs every failed dial, which during an outage is one line per probe;
// the stores log the transitions instead. Dial calls it.
func Quiet() { quietOnce.Do(func() { redis.SetLogger(driverLog{}) }) }

var quietOnce sync.Once

type driverLog struct{}

func (driverLog) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, "redis driver: "+fmt.Sprintf(format, v...))
}
