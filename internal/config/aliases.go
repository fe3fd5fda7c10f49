package config

import (
	"strconv"
	"strings"
)

// Environment variables of the seed systems that Switchboard honours so a
// deployment migrated from one of them keeps its meaning (docs/migrating.md).
// Each is an alias of a config field; Switchboard's own variable, when set,
// wins over the alias.
const (
	// EnvRedisURLLLMShim is llmshim's name for redis.url.
	EnvRedisURLLLMShim = "LLMSHIM_REDIS_URL"
	// EnvMaxRetainedLLMShim is llmshim's name for spend.max_retained_attempts.
	EnvMaxRetainedLLMShim = "LLMSHIM_GATEWAY_MAX_RETAINED_ACCOUNTING_ATTEMPTS"
	// EnvResponsesTracking is LLM Proxy's switch for tracking.responses.
	EnvResponsesTracking = "RESPONSES_ENABLE_THINKING_TRACKING"
)

// applyEnvAliases lets the environment override fields, as the seed systems
// configured them. An empty variable changes nothing.
func (l *loader) applyEnvAliases(c *Config) {
	// The environment wins over the file so one config can serve a single
	// replica and a fleet.
	for _, name := range []string{EnvRedisURL, EnvRedisURLLLMShim} {
		if v, ok := l.getenv(name); ok && v != "" {
			c.Redis.URL, c.Redis.URLFromEnv = v, true
			break
		}
	}
	if v, ok := l.getenv(EnvMaxRetainedLLMShim); ok && strings.TrimSpace(v) != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 1 || n > 10_000_000 {
			// The value is not secret, but quoting it keeps the message exact.
			l.errAt("spend.max_retained_attempts", "%s must be an integer between 1 and 10000000, got %q", EnvMaxRetainedLLMShim, v)
			l.bad["spend.max_retained_attempts"] = true
		} else {
			c.Spend.MaxRetainedAttempts = int(n)
		}
	}
	// LLM Proxy turns Responses tracking on with "1"; the usual spellings of
	// true are accepted too. It only turns tracking on, never off.
	if v, ok := l.getenv(EnvResponsesTracking); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "true", "yes", "on":
			c.Tracking.Responses = true
		}
	}
}
