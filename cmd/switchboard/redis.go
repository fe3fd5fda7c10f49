package main

import (
	"github.com/redis/go-redis/v9"

	"switchboard/internal/config"
	"switchboard/internal/redisconn"
)

// dialRedis opens a client of the config's redis section (one server, a
// cluster or Sentinel) with pool connections per server, for the queue,
// idempotency, the admin records, the usage stream or alert claims (the
// admission store opens its own, store.Open).
func dialRedis(r *config.Redis, pool int) (redis.UniversalClient, error) {
	return redisconn.Dial(redisconn.Options{URL: r.URL, Cluster: r.Cluster, Seeds: r.Seeds,
		SentinelMaster: r.Sentinel.Master, SentinelAddrs: r.Sentinel.Addrs, SentinelPassword: r.Sentinel.Password,
		CommandTimeout: r.CommandTimeout.D(), ConnectTimeout: r.ConnectTimeout.D(), PoolSize: pool})
}
