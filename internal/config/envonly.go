package config

import "os"

// RedisFromEnvironment is the config of a command that needs only the
// shared Redis (switchboard queue) when no config file is at hand: every
// default, redis.url from SWITCHBOARD_REDIS_URL (or LLMSHIM_REDIS_URL).
// ok is false when neither is set.
func RedisFromEnvironment() (c *Config, ok bool) {
	l := newLoader("(environment)", os.LookupEnv)
	c = &Config{}
	l.applyDefaults(c)
	l.queueDefaults(c)
	return c, c.Redis.URLFromEnv
}
