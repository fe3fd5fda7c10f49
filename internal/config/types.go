// Package config holds Switchboard's configuration: the YAML types, loading
// with ${ENV} expansion, validation that reports every problem with its line,
// and defaults. The format is the LLM Proxy config plus additions; a file in
// that format loads unchanged.
package config

import "time"

// Provider types.
const (
	TypeOpenAI    = "openai"
	TypeAnthropic = "anthropic"
	TypeGemini    = "gemini"
	TypeMock      = "mock"
	// The clouds (see cloud.go): Azure OpenAI, AWS Bedrock, Google Vertex AI.
	TypeAzure   = "azure"
	TypeBedrock = "bedrock"
	TypeVertex  = "vertex"
)

// Config is one loaded, validated configuration. It is immutable once
// returned by Load: the server swaps whole snapshots, never fields.
type Config struct {
	Providers   map[string]*Provider `yaml:"providers"`
	Models      []*Model             `yaml:"models"`
	Timeouts    Timeouts             `yaml:"timeouts"`
	Retries     Retries              `yaml:"retries"`
	Logging     Logging              `yaml:"logging"`
	Tracking    Tracking             `yaml:"tracking"`
	Metrics     Metrics              `yaml:"metrics"`
	Performance Performance          `yaml:"performance"`
	Auth        Auth                 `yaml:"auth"`
	Limits      Limits               `yaml:"limits"`
	Health      Health               `yaml:"health"`
	Store       Store                `yaml:"store"`
	Spend       Spend                `yaml:"spend"`
	Redis       Redis                `yaml:"redis"`
	Queue       Queue                `yaml:"queue"`
	Idempotency Idempotency          `yaml:"idempotency"`
	UsageLog    UsageLog             `yaml:"usage_log"`
	// Tracing exports OpenTelemetry spans (tracing.go); off by default.
	Tracing Tracing `yaml:"tracing"`
	// Tags reads and checks request tags (tags.go).
	Tags Tags `yaml:"tags"`
	// Alerts sends budget, circuit and queue events to a webhook
	// (alerts.go); off by default.
	Alerts Alerts `yaml:"alerts"`
	// Cache is the response cache (cache.go); off by default.
	Cache Cache `yaml:"cache"`
	// Hedge starts an extra attempt when a provider is slow to answer, for
	// every model without its own hedge: section; nil = off (see Hedge).
	Hedge *Hedge `yaml:"hedge"`
	// Pricing overrides the embedded pricing catalog per provider name and
	// provider model name, field by field.
	Pricing map[string]map[string]*Price `yaml:"pricing"`
	// Config controls how this file itself is read.
	Config FileOptions `yaml:"config"`

	// Warnings are problems that did not stop the load (unknown fields
	// under config.unknown_fields: warn), as "file:line: field: message",
	// for the caller to log.
	Warnings []string `yaml:"-"`

	// Path is the file the config was read from ("" when parsed from bytes).
	Path string `yaml:"-"`
	// Sum is the SHA-256 of the bytes read from Path (zero when parsed
	// from bytes): the config watcher's baseline.
	Sum [32]byte `yaml:"-"`

	// models indexes Models by name for Model; built by Parse.
	models map[string]*Model
}

// Provider is one upstream, defined once and referenced by models.
type Provider struct {
	// Name is the key under providers:, filled by Load.
	Name string `yaml:"-"`
	// Type selects the wire protocol: openai (default), anthropic, gemini,
	// mock, or a cloud: azure, bedrock, vertex.
	Type string `yaml:"type"`
	// BaseURL is the API root, e.g. https://api.openai.com/v1. Required
	// (http or https) except for type mock.
	BaseURL string `yaml:"base_url"`
	// APIKey is sent upstream. Optional for type openai (a keyless local
	// server such as vLLM or Ollama: no Authorization header is sent);
	// required for anthropic and gemini unless APIKeys is non-empty.
	APIKey string `yaml:"api_key"`
	// APIKeys are rotated in order, one per request.
	APIKeys []string `yaml:"api_keys"`
	// Headers are added to every upstream request; a model entry's headers
	// override them key by key.
	Headers map[string]string `yaml:"headers"`
	// Mock configures the built-in simulated provider (type mock only).
	Mock *Mock `yaml:"mock"`
	// MaxConcurrency bounds this provider's attempts in flight; nil =
	// unlimited. Range 1..100000.
	MaxConcurrency *int `yaml:"max_concurrency"`
	// RPM and TPM are this provider's request and token buckets per
	// minute; nil = unlimited, 0 = deny every attempt. Ranges 0..1e9 and
	// 0..1e12.
	RPM *int64 `yaml:"rpm"`
	TPM *int64 `yaml:"tpm"`

	// Cloud settings; each is refused on the types it does not apply to
	// (see cloud.go).

	// APIVersion (azure, required): the api-version query of the
	// deployment paths (e.g. 2024-10-21, 2025-04-01-preview), or v1 for
	// the /openai/v1/ paths.
	APIVersion string `yaml:"api_version"`
	// Entra (azure): authenticate with Microsoft Entra ID instead of
	// api_key; nil = api_key.
	Entra *Entra `yaml:"entra"`
	// Region (bedrock, required): the AWS region, e.g. us-east-1.
	Region string `yaml:"region"`
	// Profile (bedrock): the shared config profile to read credentials
	// from; "" = AWS_PROFILE or default.
	Profile string `yaml:"profile"`
	// RoleARN and ExternalID (bedrock): assume this role with the
	// credentials found; "" = use them as they are.
	RoleARN    string `yaml:"role_arn"`
	ExternalID string `yaml:"external_id"`
	// Project and Location (vertex, required): the Google Cloud project
	// and the location of the endpoint (a region, or global).
	Project  string `yaml:"project"`
	Location string `yaml:"location"`
	// CredentialsFile (vertex): a service-account (or workload identity
	// federation) JSON file; "" = Application Default Credentials.
	CredentialsFile string `yaml:"credentials_file"`
}

// Entra is Microsoft Entra ID authentication for an azure provider.
type Entra struct {
	// Method is client_secret, workload_identity or managed_identity.
	Method string `yaml:"method"`
	// TenantID and ClientID name the app registration (client_secret,
	// workload_identity; default AZURE_TENANT_ID / AZURE_CLIENT_ID), or a
	// user-assigned managed identity (ClientID; "" = system-assigned).
	TenantID string `yaml:"tenant_id"`
	ClientID string `yaml:"client_id"`
	// ClientSecret is the app's secret (client_secret).
	ClientSecret string `yaml:"client_secret"`
	// TokenFile is the federated token (workload_identity; default
	// AZURE_FEDERATED_TOKEN_FILE).
	TokenFile string `yaml:"token_file"`
	// AuthorityHost is the Entra endpoint; default
	// https://login.microsoftonline.com/ (set it for sovereign clouds).
	AuthorityHost string `yaml:"authority_host"`
}

// Keys returns the provider's API keys in rotation order.
func (p *Provider) Keys() []string {
	if len(p.APIKeys) > 0 {
		return p.APIKeys
	}
	if p.APIKey != "" {
		return []string{p.APIKey}
	}
	return nil
}

// Mock configures the built-in mock provider.
type Mock struct {
	// TTFTMs is the delay before the first token. Default 0, range 0..600000.
	TTFTMs int `yaml:"ttft_ms"`
	// TokensPerSecond paces streamed tokens after the first. Default 0
	// (as fast as possible), range 0..1e6.
	TokensPerSecond float64 `yaml:"tokens_per_second"`
	// Tokens is the number of completion tokens per answer. Default 16, range 1..100000.
	Tokens int `yaml:"tokens"`
	// FailRate is the probability (0..1) that a request fails. Default 0.
	FailRate float64 `yaml:"fail_rate"`
	// FailStatus is the HTTP status of a simulated failure. Default 500, range 400..599.
	FailStatus int `yaml:"fail_status"`
	// FailHeaders are sent with a simulated failure (e.g. Retry-After).
	FailHeaders map[string]string `yaml:"fail_headers"`
	// FailFirst fails the first N requests after each (re)start. Default 0.
	FailFirst int `yaml:"fail_first"`
	// Hang makes every request wait, sending nothing, until the caller gives up.
	Hang bool `yaml:"hang"`
	// CutAfterChunks ends streams abruptly after K content chunks; 0 = never.
	CutAfterChunks int `yaml:"cut_after_chunks"`
}

// Model is a client-facing model name routed to one or more providers.
type Model struct {
	Name string `yaml:"name"`
	// ContextLength is advertised in /v1/models/{name} and checked before
	// sending when a fallback covers context_window; optional (default 0:
	// the catalog's window), 0 or more.
	ContextLength int              `yaml:"context_length"`
	Providers     []*ModelProvider `yaml:"providers"`
	// Per-model overrides of performance.* and timeouts.ttft; nil = global.
	ProbingEnabled *bool `yaml:"probing_enabled"`
	AutoSwitch     *bool `yaml:"auto_switch"`
	ProbeInterval  *int  `yaml:"probe_interval"`
	// TTFTTimeout is seconds or a duration; `false` disables the gate for
	// this model.
	TTFTTimeout *Toggle `yaml:"ttft_timeout"`
	// FirstByteTimeout overrides timeouts.first_byte for this model:
	// seconds or a duration; `false` turns the bound off.
	FirstByteTimeout *Toggle `yaml:"first_byte_timeout"`
	// Routing orders the providers per request: measured (default),
	// weighted, least_busy, lowest_cost or lowest_latency (routing.go).
	Routing string `yaml:"routing"`
	// Fallbacks are other models tried once every provider of this one
	// failed with one of their conditions; nil = none (routing.go).
	Fallbacks *Fallbacks `yaml:"fallbacks"`
	// Hedge overrides the global hedge: section for this model; nil = the
	// global one (see Hedge).
	Hedge *Hedge `yaml:"hedge"`
	// Cache overrides the global cache: section for this model (and turns
	// the cache on for it); nil = the global one (see Cache).
	Cache *Cache `yaml:"cache"`
}

// ModelProvider is one provider entry of a model.
type ModelProvider struct {
	Provider string `yaml:"provider"`
	// Model is the provider's own name for the model; defaults to the
	// client-facing name.
	Model   string            `yaml:"model"`
	Primary bool              `yaml:"primary"`
	Headers map[string]string `yaml:"headers"`
	// Weight is this entry's share under routing: weighted: default 1,
	// range 0..1000 (0 = only when the weighted ones failed). An error on
	// a model with another policy.
	Weight *int `yaml:"weight"`
}

// Timeouts bound upstream I/O. All accept seconds (fractions allowed) or a Go
// duration string.
type Timeouts struct {
	// Open bounds connection setup (dial + TLS). Default 30 s, range 1 s..86400 s.
	Open Duration `yaml:"open"`
	// Read bounds each wait for upstream bytes: response headers and each
	// streamed chunk (a silent stream is cut after between Read and
	// 1.125·Read). Default 300 s, range 1 s..86400 s.
	Read Duration `yaml:"read"`
	// Write bounds sending the request body. Default 60 s, range 1 s..86400 s.
	Write Duration `yaml:"write"`
	// TTFT is the first-token timeout for streams; 0 = off. Range 1 s..86400 s.
	TTFT Duration `yaml:"ttft"`
	// FirstByte bounds each unary attempt until the upstream's first
	// response byte (its status line); past it the attempt is abandoned
	// and the next provider tried, as the TTFT gate does for streams.
	// 0 = off (default), range 100 ms..86400 s.
	FirstByte Duration `yaml:"first_byte"`
	// Request is the overall deadline of one client request across all
	// retries and rounds. Default 600 s, range 1 s..86400 s.
	Request Duration `yaml:"request"`
	// Shutdown bounds graceful draining at exit. Default 30 s, range 0..3600 s.
	Shutdown Duration `yaml:"shutdown"`
	// ShutdownDelay keeps serving after SIGTERM/SIGINT with /ready
	// answering 503, so that a load balancer stops sending before the
	// listener closes; then the drain (Shutdown) begins. Default 0 (off),
	// range 0..3600 s; on Kubernetes set it above the readiness probe's
	// period times its failure threshold (e.g. 10 s).
	ShutdownDelay Duration `yaml:"shutdown_delay"`
	// Stream bounds a relayed stream from its send to its end; a stream
	// still running then is ended with an error event. 0 = off (default),
	// range 1 s..86400 s.
	Stream Duration `yaml:"stream"`
}

// Retries control the attempt loop.
type Retries struct {
	// MaxAttempts per provider per round. Default 3, range 1..10.
	MaxAttempts int `yaml:"max_attempts"`
	// BackoffBase in seconds; backoff is base·2^n·(0.5..1.0). Default 2 s, range (0, 60 s].
	BackoffBase Duration `yaml:"backoff_base"`
	// MaxRounds of walking the provider list. Default 3, range 1..10.
	MaxRounds int `yaml:"max_rounds"`
	// MaxBackoff caps any single wait, stated or computed. Default 60 s, range 1 ms..86400 s.
	MaxBackoff Duration `yaml:"max_backoff"`
	// On429 is what an upstream 429 does: pause (default; LLM Proxy's
	// rule) pauses the provider until its stated reset and falls through
	// to the next one; retry (llmshim's rule) retries the same provider
	// after the stated wait (else the backoff), up to MaxAttempts, without
	// pausing it, for a single-provider deployment.
	On429 string `yaml:"on_429"`
}

// Logging selects slog's level and handler.
type Logging struct {
	// Level: debug, info (default), warn, error.
	Level string `yaml:"level"`
	// Format: text (default) or json.
	Format string `yaml:"format"`
}

// Tracking controls per-chunk inspection of streams.
type Tracking struct {
	// Enabled: default true; false passes raw bytes straight through.
	Enabled *bool `yaml:"enabled"`
	// Responses also tracks /v1/responses streams. Default false.
	Responses bool `yaml:"responses"`
}

// On reports whether tracking is enabled (default true).
func (t Tracking) On() bool { return t.Enabled == nil || *t.Enabled }

// Metrics configures periodic TPS logging.
type Metrics struct {
	TPSLog TPSLog `yaml:"tps_log"`
}

// TPSLog is the periodic TPS summary.
type TPSLog struct {
	// Interval between summaries. Default 5 s, range 0..3600 s (0 = off).
	Interval *Duration `yaml:"interval"`
	// ActivityWindow: only providers active this recently are logged. Default 10 s, range 1..86400 s.
	ActivityWindow Duration `yaml:"activity_window"`
	// EvalWindow: samples this recent are summarised. Default 60 s, range 1..86400 s.
	EvalWindow Duration `yaml:"eval_window"`
	// MinTokens suppresses lines until this many tokens accumulated. Default 500, range 0..1e9.
	MinTokens *int `yaml:"min_tokens"`
}

// Performance tunes routing and connection handling.
type Performance struct {
	// PrewarmConnections opens a connection to each provider origin at boot. Default false.
	PrewarmConnections bool `yaml:"prewarm_connections"`
	// ConnectionMaxAge retires pooled upstream connections this long after
	// they were opened, so DNS and load-balancer changes are picked up
	// (LLM Proxy's pool: 300 s). Default 300 s, range 0..86400 s (0 = never).
	ConnectionMaxAge Duration `yaml:"connection_max_age"`
	// ProbingEnabled: background probes and auto-selection. Default true.
	ProbingEnabled *bool `yaml:"probing_enabled"`
	// AutoSwitch the active provider when a better one is measured. Default
	// false; forced off when probing is off.
	AutoSwitch bool `yaml:"auto_switch"`
	// ProbeInterval: probe every N requests of a model. Default 3, range 1..100000.
	ProbeInterval int `yaml:"probe_interval"`
	// ProbeMaxPerMinute caps probe launches over all models. Default unset
	// (unlimited), range 1..10000; 0 also means unlimited.
	ProbeMaxPerMinute int `yaml:"probe_max_per_minute"`
	// SampleWindow keeps samples this recent for scoring. Default 300 s, range 1..86400 s.
	SampleWindow Duration `yaml:"sample_window"`
	// ConfigPollInterval between config file checks. Default 2 s; 0 = off; range 0..86400 s.
	ConfigPollInterval *Duration `yaml:"config_poll_interval"`
	// QuotaPauseDefaultSeconds when a quota answer states no reset. Default 60, range 1..86400.
	QuotaPauseDefaultSeconds int `yaml:"quota_pause_default_seconds"`
	// WritePrimary writes the active provider back to the config as
	// primary: true at shutdown. Default false.
	WritePrimary bool `yaml:"write_primary"`
}

// Probing reports whether background probing is on (default true).
func (p Performance) Probing() bool { return p.ProbingEnabled == nil || *p.ProbingEnabled }

// Auth configures incoming authentication.
type Auth struct {
	// Token, when set, is required on every /v1 request (Bearer or x-api-key).
	// It is a single anonymous identity without limits of its own.
	Token string `yaml:"token"`
	// MetricsToken, when set, opens /metrics (as does an admin key; with
	// any auth configured, /metrics needs one of the two).
	MetricsToken string `yaml:"metrics_token"`
	// AdminToken, when set, opens the admin API (/admin/v1/...) as does a
	// key with role: admin. It is a secret like the keys; it does not
	// authenticate /v1 requests. Default: none (then only admin keys, and
	// with auth off entirely the admin API stays closed).
	AdminToken string `yaml:"admin_token"`
	// KeysFile is a JSON file mapping gateway keys to identities, read (and
	// re-read on every reload) by Load; a relative path is relative to the
	// config file's directory.
	KeysFile string `yaml:"keys_file"`
	// Keys maps gateway keys (plaintext or "sha256:<64 hex>") to
	// identities. Keys are secrets: errors name them by position
	// (auth.keys[#2]), never by value.
	Keys map[string]*KeySpec `yaml:"keys,secret"`
	// FileKeys holds the entries read from KeysFile, and KeysPath the
	// file's resolved path (for a reload watcher); filled by Load.
	FileKeys map[string]*KeySpec `yaml:"-"`
	KeysPath string              `yaml:"-"`
	// KeysSum is the SHA-256 of the keys file's bytes this config was
	// built from: a watcher's baseline, so a write after the read is a
	// change even when the watch starts later.
	KeysSum [32]byte `yaml:"-"`
}

// Enabled reports whether callers must present a gateway key: a token or
// any configured key.
func (a *Auth) Enabled() bool {
	return a.Token != "" || len(a.Keys) > 0 || len(a.FileKeys) > 0
}

// KeySpec is the identity a gateway key maps to. The same shape is used in
// the YAML auth.keys map and in the JSON keys file. An omitted limit is
// unlimited; an explicit 0 denies.
type KeySpec struct {
	// Tenant names the identity; counters, budgets and metric labels are
	// per tenant. Required; keys of one tenant must carry equal limits.
	Tenant string `yaml:"tenant" json:"tenant"`
	// Tier is informational (logs, metrics). Range 0..1000.
	Tier int `yaml:"tier" json:"tier"`
	// Role is "tenant" (default: sees its own usage and the model names)
	// or "admin" (also sees providers, traffic, every tenant's spend and
	// /metrics). It may differ between keys of one tenant.
	Role string `yaml:"role" json:"role"`
	// RPM, TPM: per-minute request and token buckets. Ranges 0..1e9, 0..1e12.
	RPM *int64 `yaml:"rpm" json:"rpm"`
	TPM *int64 `yaml:"tpm" json:"tpm"`
	// DailyRequests caps attempts in a rolling 86400 s. Range 0..1e9.
	DailyRequests *int64 `yaml:"daily_requests" json:"daily_requests"`
	// BudgetUSD caps spend per budget window; finite, 0..9007199.254740992;
	// 0 freezes the identity; nil = no budget.
	BudgetUSD *float64 `yaml:"budget_usd" json:"budget_usd"`
	// BudgetWindowSecs is the tumbling budget window. Default 86400, range
	// 60..31536000.
	BudgetWindowSecs *int64 `yaml:"budget_window_secs" json:"budget_window_secs"`
	// BudgetAllowUnpriced admits requests whose cost cannot be bounded by
	// holding the whole remaining window balance. Default false.
	BudgetAllowUnpriced bool `yaml:"budget_allow_unpriced" json:"budget_allow_unpriced"`

	// Source locates the entry for messages: "file:line".
	Source string `yaml:"-" json:"-"`
}

// Limits bound requests.
type Limits struct {
	// MaxRequestBody in bytes. Default 10 MiB, range 1024..100 MiB.
	MaxRequestBody int64 `yaml:"max_request_body"`
	// MaxConcurrency bounds logical requests being prepared or served
	// (streams hold theirs until they end). Default sized from descriptors
	// and memory (internal/capacity), at least 256; range 1..1000000.
	MaxConcurrency int `yaml:"max_concurrency"`
	// QueueTimeout bounds the wait for a concurrency slot, logical or per
	// provider; then 503 with Retry-After. Default 5 s, range 0..3600 s.
	QueueTimeout Duration `yaml:"queue_timeout"`
	// RPM and TPM are gateway-wide buckets per minute; nil = unlimited,
	// 0 = deny everything. Ranges 0..1e9 and 0..1e12.
	RPM *int64 `yaml:"rpm"`
	TPM *int64 `yaml:"tpm"`
	// PenaltySeconds blocks a provider's bucket after an upstream 429.
	// Default 5, range 0..3600 (0 = off).
	PenaltySeconds int `yaml:"penalty_seconds"`
	// AdvisoryHeaders turns on X-Switchboard-RateLimit-* response headers
	// (also on with RATE_LIMIT_HEADERS_ENABLED). Default false.
	AdvisoryHeaders bool `yaml:"advisory_headers"`
	// AdvisoryPrefix names the advisory headers: <prefix>-Limit,
	// -Remaining, -Reset. Default X-Switchboard-RateLimit; an HTTP header
	// token of at most 64 bytes (X-MultiLLM-RateLimit for MultiLLM's
	// clients).
	AdvisoryPrefix string `yaml:"advisory_prefix"`
	// Window selects bucket (default) or sliding counting for the rpm and
	// tpm limits, per dimension (see Windows).
	Window Windows `yaml:"window"`
	// BodyTimeout bounds reading one request body, from the end of its
	// headers; a slower body is answered 408. Default 30 s, range
	// 100 ms..3600 s.
	BodyTimeout Duration `yaml:"body_timeout"`
	// MaxConnections caps open client connections; beyond it only /health
	// and /ready are served (on a few short-lived spare connections).
	// Default (omitted): half of RLIMIT_NOFILE less a reserve, at least
	// 64; range 1..10000000.
	MaxConnections int `yaml:"max_connections"`
	// MaxBufferedBytes bounds the upstream answers held in memory at once
	// (unary bodies being read or relayed), gateway-wide; an answer that
	// does not fit fails its attempt as bad_response. Default 512 MiB,
	// range 1 MiB..64 GiB.
	MaxBufferedBytes int64 `yaml:"max_buffered_bytes"`
	// TenantCounting says what a tenant's (and an issued key's own) rpm,
	// daily count and tpm count: request (default: each client request
	// once, whatever retries, fallbacks and hedges the gateway makes for
	// it; tpm settles on the tokens used) or attempt (every provider
	// attempt, llmshim's rule). Provider and global buckets count every
	// attempt either way.
	TenantCounting string `yaml:"tenant_counting"`
}

// limits.tenant_counting values.
const (
	CountRequests = "request"
	CountAttempts = "attempt"
)

// Store selects where admission and spend state lives.
type Store struct {
	// Backend: sqlite (default) or memory.
	Backend string `yaml:"backend"`
	// Path of the SQLite file; default STATE_DIR/switchboard.db (resolved
	// by the caller, which knows STATE_DIR).
	Path string `yaml:"path"`
}

// Redis shares admission, spend and provider health across replicas. With a
// URL, the store is Redis (store.backend and store.path are then unused).
type Redis struct {
	// URL of the server: redis://[user:password@]host[:port][/db],
	// rediss:// (TLS) or unix:///path/to/socket. Empty = this process
	// only. The environment variable SWITCHBOARD_REDIS_URL (or, when that
	// is unset, LLMSHIM_REDIS_URL), when set and non-empty, replaces it.
	URL string `yaml:"url"`
	// CommandTimeout bounds each command, its reply included. Default
	// 500 ms, range 1 ms..60 s.
	CommandTimeout Duration `yaml:"command_timeout"`
	// ConnectTimeout bounds a new connection's setup. Default 1 s, range
	// 1 ms..60 s.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// Cluster: URL is one seed node of a Redis Cluster (or a Valkey
	// cluster); Seeds adds more, as host:port. Default false. Every
	// script's keys share a hash tag (docs/fleet.md), so they run in
	// cluster mode as they do on one server.
	Cluster bool `yaml:"cluster"`
	// Seeds are further cluster nodes to discover the cluster from, as
	// host:port (cluster only; at most 64). Default none.
	Seeds []string `yaml:"seeds"`
	// Sentinel finds the primary through Redis Sentinel instead of URL's
	// host (URL then carries only the user, password, database and
	// scheme). Default off.
	Sentinel RedisSentinel `yaml:"sentinel"`
	// URLFromEnv is set when SWITCHBOARD_REDIS_URL (or llmshim's
	// LLMSHIM_REDIS_URL) supplied URL.
	URLFromEnv bool `yaml:"-"`
}

// RedisSentinel names a Sentinel-monitored primary.
type RedisSentinel struct {
	// Master is the primary's name as the sentinels know it (required
	// with Addrs).
	Master string `yaml:"master"`
	// Addrs are the sentinels, as host:port (1..64).
	Addrs []string `yaml:"addrs"`
	// Password authenticates to the sentinels (not to Redis: that is
	// URL's). Default none.
	Password string `yaml:"password"`
}

// On reports whether Sentinel is configured.
func (s *RedisSentinel) On() bool { return s.Master != "" || len(s.Addrs) > 0 || s.Password != "" }

// Enabled reports whether state is shared through Redis.
func (r *Redis) Enabled() bool { return r.URL != "" }

// Spend configures the spend ledger.
type Spend struct {
	// MaxRetainedAttempts bounds attempt records (live ones plus settled
	// ones kept 24 h for late settlement). When full, a new budgeted attempt
	// fails closed with 503. Default 100000, range 1..10000000.
	MaxRetainedAttempts int `yaml:"max_retained_attempts"`
}

// Price overrides one model's catalog entry field by field. Prices are USD
// per million tokens.
type Price struct {
	Input      *float64 `yaml:"input"`
	Output     *float64 `yaml:"output"`
	CacheRead  *float64 `yaml:"cache_read"`
	CacheWrite *float64 `yaml:"cache_write"`
	// Context is the context window in tokens, range 1..100000000.
	Context *int64 `yaml:"context"`
	// MaxOutput is the output ceiling in tokens, range 0..100000000.
	MaxOutput *int64 `yaml:"max_output"`
	// Tiers replace the catalog's context tiers when given.
	Tiers []*PriceTier `yaml:"tiers"`
}

// PriceTier applies when the prompt has more than Above input tokens.
type PriceTier struct {
	Above      int64    `yaml:"above"`
	Input      *float64 `yaml:"input"`
	Output     *float64 `yaml:"output"`
	CacheRead  *float64 `yaml:"cache_read"`
	CacheWrite *float64 `yaml:"cache_write"`
}

// Health configures provider health tracking.
type Health struct {
	Breaker Breaker `yaml:"breaker"`
}

// Breaker is the per-provider circuit breaker.
type Breaker struct {
	// Threshold failures within Window open the circuit. Default 3, range 0..1000 (0 disables).
	Threshold *int `yaml:"threshold"`
	// Window is the sliding failure window. Default 60 s, range 1 ms..86400 s.
	Window Duration `yaml:"window"`
	// Cooldown before a half-open probe. Default 60 s, range 1 ms..86400 s.
	Cooldown Duration `yaml:"cooldown"`
}

// Duration is a time.Duration that YAML may give as a number of seconds
// (fractions allowed) or a Go duration string ("500ms", "2m").
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Toggle is a duration that may also be `false` (disabled) or `true`
// (use the global value).
type Toggle struct {
	Disabled bool
	Value    Duration
}

// FileOptions controls how the config file is read.
type FileOptions struct {
	// UnknownFields: strict (default) makes a key Switchboard does not know
	// an error; warn logs it and ignores it, for a config migrated from
	// another gateway.
	UnknownFields string `yaml:"unknown_fields"`
}

// DefaultAdvisoryPrefix is limits.advisory_prefix when omitted.
const DefaultAdvisoryPrefix = "X-Switchboard-RateLimit"

// retries.on_429 values.
const (
	On429Pause = "pause"
	On429Retry = "retry"
)

// Unknown-field policies (config.unknown_fields).
const (
	UnknownStrict = "strict"
	UnknownWarn   = "warn"
)
