package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

const (
	day = 24 * time.Hour
	mib = 1 << 20
)

// Bounds of rate limits: requests and tokens per minute.
const (
	maxRPM = 1_000_000_000
	maxTPM = 1_000_000_000_000
)

var (
	storeBackends = []string{StoreSQLite, StoreMemory}
	providerTypes = []string{TypeOpenAI, TypeAnthropic, TypeGemini, TypeMock, TypeAzure, TypeBedrock, TypeVertex}
	logLevels     = []string{"debug", "info", "warn", "error"}
	logFormats    = []string{"text", "json"}
)

func modelPath(i int) string    { return fmt.Sprintf("models[%d]", i) }
func providerPath(j int) string { return fmt.Sprintf(".providers[%d]", j) }

// validate checks every rule and records every failure; it never stops at
// the first.
func (l *loader) validate(c *Config) {
	l.validateTimeouts(&c.Timeouts)
	l.validateRetries(&c.Retries)
	l.oneOf("logging.level", c.Logging.Level, logLevels)
	l.oneOf("logging.format", c.Logging.Format, logFormats)
	l.oneOf("retries.on_429", c.Retries.On429, []string{On429Pause, On429Retry})
	l.oneOf("config.unknown_fields", c.Config.UnknownFields, []string{UnknownStrict, UnknownWarn})

	tl := &c.Metrics.TPSLog
	l.durRange("metrics.tps_log.interval", *tl.Interval, 0, time.Hour)
	l.durRange("metrics.tps_log.activity_window", tl.ActivityWindow, time.Second, day)
	l.durRange("metrics.tps_log.eval_window", tl.EvalWindow, time.Second, day)
	l.intRange("metrics.tps_log.min_tokens", int64(*tl.MinTokens), 0, 1e9)

	p := &c.Performance
	l.intRange("performance.probe_interval", int64(p.ProbeInterval), 1, 100000)
	l.intRange("performance.probe_max_per_minute", int64(p.ProbeMaxPerMinute), 0, 10000)
	l.durRange("performance.sample_window", p.SampleWindow, time.Second, day)
	l.durRange("performance.connection_max_age", p.ConnectionMaxAge, 0, day)
	l.durRange("performance.config_poll_interval", *p.ConfigPollInterval, 0, day)
	l.intRange("performance.quota_pause_default_seconds", int64(p.QuotaPauseDefaultSeconds), 1, 86400)

	l.validateLimits(&c.Limits)
	l.oneOf("store.backend", c.Store.Backend, storeBackends)
	if c.Store.Backend == StoreMemory && c.Store.Path != "" {
		l.errAt("store.path", "only used with backend: sqlite (backend is memory)")
	}
	l.intRange("spend.max_retained_attempts", int64(c.Spend.MaxRetainedAttempts), 1, 10_000_000)
	l.validateRedis(&c.Redis)
	l.validateHedge("hedge", c.Hedge)

	b := &c.Health.Breaker
	l.intRange("health.breaker.threshold", int64(*b.Threshold), 0, 1000)
	l.durRange("health.breaker.window", b.Window, time.Millisecond, day)
	l.durRange("health.breaker.cooldown", b.Cooldown, time.Millisecond, day)

	names := make([]string, 0, len(c.Providers))
	for name := range c.Providers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		l.validateProvider(name, c.Providers[name])
	}
	l.validateModels(c, names)
	l.validateAuth(c)
	l.validatePricing(c, names)
}

// validateLimits checks the limits section; rpm/tpm are optional (nil =
// unlimited) and an explicit 0 is valid: it denies everything.
func (l *loader) validateLimits(lim *Limits) {
	l.intRange("limits.max_request_body", lim.MaxRequestBody, 1024, 100*mib)
	l.intRange("limits.max_concurrency", int64(lim.MaxConcurrency), 1, 1_000_000)
	l.durRange("limits.queue_timeout", lim.QueueTimeout, 0, time.Hour)
	l.optRange("limits.rpm", lim.RPM, 0, maxRPM)
	l.optRange("limits.tpm", lim.TPM, 0, maxTPM)
	l.intRange("limits.penalty_seconds", int64(lim.PenaltySeconds), 0, 3600)
	if p := lim.AdvisoryPrefix; p == "" || len(p) > 64 || strings.IndexFunc(p, notTokenChar) >= 0 {
		l.errAt("limits.advisory_prefix", "must be an HTTP header name of 1 to 64 letters, digits or -, e.g. X-MultiLLM-RateLimit, got %q", p)
	}
	l.durRange("limits.body_timeout", lim.BodyTimeout, 100*time.Millisecond, time.Hour)
	if l.has("limits.max_connections") {
		l.intRange("limits.max_connections", int64(lim.MaxConnections), 1, 10_000_000)
	}
	l.intRange("limits.max_buffered_bytes", lim.MaxBufferedBytes, mib, 64<<30)
	l.oneOf("limits.tenant_counting", lim.TenantCounting, []string{CountRequests, CountAttempts})
}

// validateRedis checks the redis section. The URL may hold a password, so
// messages show it redacted, or not at all when it does not parse.
func (l *loader) validateRedis(r *Redis) {
	l.durRange("redis.command_timeout", r.CommandTimeout, time.Millisecond, time.Minute)
	l.durRange("redis.connect_timeout", r.ConnectTimeout, time.Millisecond, time.Minute)
	if r.URL == "" {
		if r.Cluster || len(r.Seeds) > 0 || r.Sentinel.On() {
			l.errAt("redis.url", "redis.cluster, redis.seeds and redis.sentinel need redis.url (or %s)", EnvRedisURL)
		}
		return
	}
	l.validateRedisTopology(r)
	from := ""
	if r.URLFromEnv {
		from = " (from " + EnvRedisURL + ")"
	}
	const want = "want redis://host:port[/db], rediss://host:port[/db] or unix:///path"
	u, err := url.Parse(r.URL)
	if err != nil {
		l.errAt("redis.url", "%s%s; the value does not parse as a URL", want, from)
		return
	}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Hostname() == "" {
			l.errAt("redis.url", "%s%s; got %q without a host", want, from, u.Redacted())
			return
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				l.errAt("redis.url", "port must be between 1 and 65535%s, got %q", from, p)
			}
		}
		if db := strings.Trim(u.Path, "/"); db != "" {
			if n, err := strconv.Atoi(db); err != nil || n < 0 {
				l.errAt("redis.url", "the path selects a database and must be a number such as /0%s, got %q", from, u.Path)
			} else if n != 0 && r.Cluster {
				l.errAt("redis.url", "a cluster has only database 0, got %q", u.Path)
			}
		}
	case "unix":
		if u.Path == "" {
			l.errAt("redis.url", "%s%s; got %q without a socket path", want, from, u.Redacted())
		}
	default:
		l.errAt("redis.url", "%s%s; got scheme %q", want, from, u.Scheme)
	}
}

// maxRedisAddrs bounds redis.seeds and redis.sentinel.addrs.
const maxRedisAddrs = 64

// validateRedisTopology checks cluster seeds and sentinels: each a
// host:port, and at most one of cluster and sentinel.
func (l *loader) validateRedisTopology(r *Redis) {
	if r.Cluster && r.Sentinel.On() {
		l.errAt("redis.sentinel", "redis.cluster and redis.sentinel exclude each other: a cluster fails over on its own")
	}
	if len(r.Seeds) > 0 && !r.Cluster {
		l.errAt("redis.seeds", "seeds are cluster nodes: set redis.cluster: true, or drop them")
	}
	l.addrs("redis.seeds", r.Seeds, 0)
	if r.Sentinel.On() {
		if r.Sentinel.Master == "" {
			l.errAt("redis.sentinel.master", "the primary's name as the sentinels know it is required with redis.sentinel")
		}
		l.addrs("redis.sentinel.addrs", r.Sentinel.Addrs, 1)
	}
}

// addrs checks a list of host:port, at least min and at most
// maxRedisAddrs of them.
func (l *loader) addrs(path string, as []string, min int) {
	if len(as) < min || len(as) > maxRedisAddrs {
		l.errAt(path, "must list %d..%d host:port addresses, got %d", min, maxRedisAddrs, len(as))
		return
	}
	for i, a := range as {
		host, port, err := net.SplitHostPort(a)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			l.errAt(fmt.Sprintf("%s[%d]", path, i), "want host:port with a port 1..65535, got %q", a)
		}
	}
}

// optRange checks an optional integer.
func (l *loader) optRange(path string, v *int64, lo, hi int64) {
	if v != nil {
		l.intRange(path, *v, lo, hi)
	}
}

func (l *loader) validateTimeouts(t *Timeouts) {
	l.durRange("timeouts.open", t.Open, time.Second, day)
	l.durRange("timeouts.read", t.Read, time.Second, day)
	l.durRange("timeouts.write", t.Write, time.Second, day)
	reqOK := l.durRange("timeouts.request", t.Request, time.Second, day)
	l.durRange("timeouts.shutdown", t.Shutdown, 0, time.Hour)
	l.durRange("timeouts.shutdown_delay", t.ShutdownDelay, 0, time.Hour)
	if t.FirstByte != 0 { // 0 means off, as when omitted
		l.durRange("timeouts.first_byte", t.FirstByte, 100*time.Millisecond, day)
	}
	if t.Stream != 0 { // 0 means off, as when omitted
		l.durRange("timeouts.stream", t.Stream, time.Second, day)
	}
	// ttft 0 means off, as when omitted.
	if t.TTFT == 0 {
		return
	}
	if l.durRange("timeouts.ttft", t.TTFT, time.Second, day) && reqOK && t.Request < t.TTFT {
		// Blame the field the user wrote: the other one is a default.
		if l.has("timeouts.request") {
			l.errAt("timeouts.request", "must not be shorter than timeouts.ttft (%s)", t.TTFT)
		} else {
			l.errAt("timeouts.ttft", "must not exceed timeouts.request (%s, the default)", t.Request)
		}
	}
}

func (l *loader) validateRetries(r *Retries) {
	l.intRange("retries.max_attempts", int64(r.MaxAttempts), 1, 10)
	l.intRange("retries.max_rounds", int64(r.MaxRounds), 1, 10)
	baseOK := r.BackoffBase > 0 && r.BackoffBase <= Duration(time.Minute)
	if !baseOK {
		l.errAt("retries.backoff_base", "must be greater than 0 and at most 60s, got %s", r.BackoffBase)
	}
	if l.durRange("retries.max_backoff", r.MaxBackoff, time.Millisecond, day) && baseOK && r.MaxBackoff < r.BackoffBase {
		if l.has("retries.max_backoff") {
			l.errAt("retries.max_backoff", "must not be less than retries.backoff_base (%s)", r.BackoffBase)
		} else {
			l.errAt("retries.backoff_base", "must not exceed retries.max_backoff (%s, the default)", r.MaxBackoff)
		}
	}
}

func (l *loader) validateProvider(name string, p *Provider) {
	base := "providers." + name
	if strings.TrimSpace(name) == "" {
		l.errAt(base, "provider name must not be empty")
	}
	l.oneOf(base+".type", p.Type, providerTypes)
	mock := p.Type == TypeMock
	switch {
	case p.BaseURL != "":
		if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			l.errAt(base+".base_url", "want an http:// or https:// URL with a host, got %q", redactURL(p.BaseURL))
		}
	case p.Type == TypeBedrock || p.Type == TypeVertex:
		// Built from region or location, whose own error says why not.
	case !mock:
		l.errAt(base+".base_url", "required")
	}
	l.checkVersionPath(base, p)
	l.validateCloud(base, p)
	// An OpenAI-compatible server on one's own machine (vLLM, Ollama,
	// SGLang) often takes no key: then no Authorization header is sent.
	// The hosted Anthropic and Gemini APIs always need one.
	if (p.Type == TypeAnthropic || p.Type == TypeGemini) && p.APIKey == "" && len(p.APIKeys) == 0 {
		l.errAt(base+".api_key", "required for type %s (or a non-empty api_keys list)", p.Type)
	}
	for i, k := range p.APIKeys {
		if strings.TrimSpace(k) == "" {
			l.errAt(fmt.Sprintf("%s.api_keys[%d]", base, i), "must not be empty")
		}
	}
	l.headers(base+".headers", p.Headers)
	if p.MaxConcurrency != nil {
		l.intRange(base+".max_concurrency", int64(*p.MaxConcurrency), 1, 100000)
	}
	l.optRange(base+".rpm", p.RPM, 0, maxRPM)
	l.optRange(base+".tpm", p.TPM, 0, maxTPM)
	if p.Mock == nil {
		return
	}
	mb := base + ".mock"
	if !mock {
		l.errAt(mb, "only allowed with type: mock (type is %q)", p.Type)
		return
	}
	m := p.Mock
	l.intRange(mb+".ttft_ms", int64(m.TTFTMs), 0, 600000)
	l.floatRange(mb+".tokens_per_second", m.TokensPerSecond, 0, 1e6)
	l.intRange(mb+".tokens", int64(m.Tokens), 1, 100000)
	l.floatRange(mb+".fail_rate", m.FailRate, 0, 1)
	l.intRange(mb+".fail_status", int64(m.FailStatus), 400, 599)
	if m.FailFirst < 0 {
		l.errAt(mb+".fail_first", "must not be negative, got %d", m.FailFirst)
	}
	if m.CutAfterChunks < 0 {
		l.errAt(mb+".cut_after_chunks", "must not be negative, got %d", m.CutAfterChunks)
	}
	l.headers(mb+".fail_headers", m.FailHeaders)
}

func (l *loader) validateModels(c *Config, providers []string) {
	if len(c.Models) == 0 {
		l.errAt("models", "at least one model is required")
		return
	}
	known := "no providers are defined"
	if len(providers) > 0 {
		known = "known: " + strings.Join(providers, ", ")
	}
	first := map[string]int{}
	for i, m := range c.Models {
		base := modelPath(i)
		switch j, dup := first[m.Name]; {
		case strings.TrimSpace(m.Name) == "":
			l.errAt(base+".name", "required")
		case dup:
			l.errAt(base+".name", "duplicate model name %q (first at line %d)", m.Name, l.lineOf(modelPath(j)+".name"))
		default:
			first[m.Name] = i
		}
		if m.ContextLength < 0 {
			l.errAt(base+".context_length", "must not be negative, got %d", m.ContextLength)
		}
		if m.ProbeInterval != nil {
			l.intRange(base+".probe_interval", int64(*m.ProbeInterval), 1, 100000)
		}
		l.toggleRange(base+".ttft_timeout", m.TTFTTimeout, time.Second)
		l.toggleRange(base+".first_byte_timeout", m.FirstByteTimeout, 100*time.Millisecond)
		l.validateRouting(base, m)
		l.validateHedge(base+".hedge", m.Hedge)
		if h, on := c.HedgeFor(m); on && m.Hedge != nil && len(m.Providers) == 1 {
			l.errAt(base+".hedge", "needs at least two providers to hedge between; this model has one (max_extra: %d)", *h.MaxExtra)
		}
		if len(m.Providers) == 0 {
			l.errAt(base+".providers", "at least one provider is required")
		}
		primary := -1
		seen := map[string]int{}
		for j, mp := range m.Providers {
			pb := base + providerPath(j)
			switch k, dup := seen[mp.Provider]; {
			case mp.Provider == "":
				l.errAt(pb+".provider", "required")
			case c.Providers[mp.Provider] == nil:
				l.errAt(pb+".provider", "unknown provider %q (%s)", mp.Provider, known)
			case dup:
				l.errAt(pb+".provider", "provider %q is already listed at providers[%d] of this model", mp.Provider, k)
			default:
				seen[mp.Provider] = j
			}
			// Without a model name the default is empty too; "name: required" says it.
			if mp.Model == "" && (m.Name != "" || l.has(pb+".model")) {
				l.errAt(pb+".model", "must not be empty")
			}
			if mp.Primary {
				if primary >= 0 {
					l.errAt(pb+".primary", "providers[%d] of this model is already primary; at most one may be", primary)
				} else {
					primary = j
				}
			}
			l.headers(pb+".headers", mp.Headers)
		}
	}
	l.validateFallbacks(c)
}

func (l *loader) isBool(path string) bool {
	n := l.nodes[path]
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool"
}

// headers checks names are HTTP tokens and values cannot split a header.
func (l *loader) headers(base string, h map[string]string) {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := base + "." + k
		if !isToken(k) {
			l.errAt(p, "invalid header name %q", k)
		}
		if strings.ContainsAny(h[k], "\r\n\x00") {
			l.errAt(p, "header value must not contain CR, LF or NUL")
		}
	}
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func (l *loader) oneOf(path, v string, allowed []string) {
	if !slices.Contains(allowed, v) {
		l.errAt(path, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
}

func (l *loader) intRange(path string, v, lo, hi int64) bool {
	if v < lo || v > hi {
		l.errAt(path, "must be between %d and %d, got %d", lo, hi, v)
		return false
	}
	return true
}

func (l *loader) floatRange(path string, v, lo, hi float64) bool {
	if !(v >= lo && v <= hi) { // also rejects NaN
		l.errAt(path, "must be between %g and %g, got %g", lo, hi, v)
		return false
	}
	return true
}

func (l *loader) durRange(path string, d Duration, lo, hi time.Duration) bool {
	if d.D() < lo || d.D() > hi {
		l.errAt(path, "must be between %s and %s, got %s", secs(lo), secs(hi), d)
		return false
	}
	return true
}

// toggleRange checks a per-model timeout (a Toggle) against lo..1 day.
// true parses as a zero, non-disabled Toggle meaning "use the global"; a
// literal 0 is out of range like any other value.
func (l *loader) toggleRange(path string, t *Toggle, lo time.Duration) {
	switch {
	case t == nil || t.Disabled || t.Value == 0 && l.isBool(path):
	case t.Value == 0:
		l.errAt(path, "must be between %s and %s, got 0s (use false to disable)", secs(lo), secs(day))
	default:
		l.durRange(path, t.Value, lo, day)
	}
}

// secs prints a bound in seconds, the unit the docs use.
func secs(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// notTokenChar reports a rune that may not appear in a header name built
// from a configured prefix (letters, digits and '-' only, so the name is
// safe through any proxy).
func notTokenChar(r rune) bool {
	return !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
}

// redactURL is u for a message: a password (user:pass@) or a query (which
// may hold ?key=) masked, and a URL that does not parse not shown at all.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a value that does not parse as a URL; not shown)"
	}
	if u.RawQuery != "" {
		u.RawQuery = "xxxxx"
	}
	return u.Redacted()
}
