package admit

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/limit"
	"switchboard/internal/spend"
	"switchboard/internal/store"
	"switchboard/internal/tenant"
)

// Scope says how far a refusal reaches.
type Scope int

const (
	// ScopeProvider: this provider cannot take the attempt now; the loop
	// may advance to a distinct provider.
	ScopeProvider Scope = iota + 1
	// ScopeRequest: the caller's own limit, budget or the gateway as a
	// whole refused; the request ends with this refusal.
	ScopeRequest
)

func (s Scope) String() string {
	switch s {
	case ScopeProvider:
		return "provider"
	case ScopeRequest:
		return "request"
	}
	return "unknown"
}

// Error codes of refusals.
const (
	CodeRateLimit   = "rate_limit_exceeded"
	CodeTokenRate   = "token_rate_limit_exceeded"
	CodeDaily       = "daily_limit_exceeded"
	CodeBudget      = "budget_exceeded"
	CodeUnpriceable = "unpriceable_under_budget"
	// CodeRequestTooCostly: the request's own reservation exceeds what is
	// left of the budget (some is left): lower max_tokens.
	CodeRequestTooCostly = "request_exceeds_budget"
	CodeOverloaded       = "overloaded"
	// CodeCanceled: the caller's context ended while waiting; nothing
	// should be written to a client that left.
	CodeCanceled = "canceled"
)

// Refusal is a gateway refusal, ready for the error writer:
// {"error":{"message","type","param","code"}} with Status, and
// Retry-After when RetryAfter > 0.
type Refusal struct {
	Status int
	Code   string
	// Type is the OpenAI error type for Code.
	Type    string
	Param   string
	Message string
	// RetryAfter in whole seconds (0 = no header).
	RetryAfter int
	Scope      Scope
	// Advice is the refused counter for advisory headers (429 only; the
	// caller's own or the gateway's, never a provider's); its Reset
	// equals RetryAfter.
	Advice Advice
	// Fit is the largest output limit a request_exceeds_budget refusal
	// found to fit (0: none).
	Fit int64
}

func (r *Refusal) Error() string { return fmt.Sprintf("%d %s: %s", r.Status, r.Code, r.Message) }

// Controller is the admission and spend façade. Create one per process
// with New, Configure it on every config load; its state (buckets,
// counters, ledger, gates) survives reloads, keyed by provider and tenant
// names.
type Controller struct {
	st  store.Store
	clk clock.Clock
	m   *metrics

	snap    atomic.Pointer[snapshot]
	reqGate *limit.Gate

	gmu   sync.Mutex
	gates map[string]*limit.Gate // per-provider attempt gates

	// kmu serialises the swaps of the key table (Configure, SetIssued),
	// never taken on the request path; issued is what the admin API issued.
	kmu    sync.Mutex
	issued *tenant.Issued
}

// snapshot is what one config compiles to.
type snapshot struct {
	cfg          *config.Config
	keys         *tenant.Table
	catalog      *spend.Catalog
	queueTimeout time.Duration
	penalty      time.Duration
	global       rates
	providers    map[string]*providerInfo
	maxRetained  int
}

type rates struct{ rpm, tpm limit.Rate }

type providerInfo struct {
	name   string
	typ    string
	rates  rates
	family spend.Family
	hosted bool
	// group and keys are its buckets' names, built once per config.
	group, rpmKey, tpmKey string
}

// newProviderInfo fills in the bucket names.
func newProviderInfo(pi providerInfo) *providerInfo {
	pi.group = groupOf(pi.name)
	pi.rpmKey, pi.tpmKey = pi.group+":rpm", pi.group+":tpm"
	return &pi
}

// New returns a Controller over st, timed by clk (nil = wall clock), with
// its collectors registered on reg (nil = not registered). Call Configure
// before use; until then everything is admitted.
func New(st store.Store, clk clock.Clock, reg prometheus.Registerer) *Controller {
	if clk == nil {
		clk = clock.Real{}
	}
	c := &Controller{st: st, clk: clk, gates: map[string]*limit.Gate{}}
	c.reqGate = limit.NewGate(clk, 256)
	c.m = newMetrics(reg, newGateCollector(c), st)
	return c
}

func rateOf(v *int64) limit.Rate {
	if v == nil {
		return limit.Rate{Limit: limit.Unlimited, Window: time.Minute}
	}
	return limit.Rate{Limit: *v, Window: time.Minute}
}

// tenantRates are id's own rpm and tpm (sliding per limits.window).
func (s *snapshot) tenantRates(id *tenant.Identity) rates {
	return windowed(rates{rateOf(id.RPM), rateOf(id.TPM)}, s.cfg.Limits.Window)
}

// windowed marks rs sliding per limits.window.
func windowed(rs rates, w config.Windows) rates {
	rs.rpm.Sliding, rs.tpm.Sliding = w.Sliding("rpm"), w.Sliding("tpm")
	return rs
}

// Configure applies a (validated) config. Gates are resized in place and
// bucket state is kept by name, so a reload changes limits without
// forgetting what was consumed.
func (c *Controller) Configure(cfg *config.Config) error {
	if cfg == nil {
		return errors.New("admit: nil config")
	}
	c.kmu.Lock()
	defer c.kmu.Unlock()
	s := &snapshot{
		cfg:          cfg,
		keys:         tenant.Compile(&cfg.Auth, c.issued),
		catalog:      spend.New(cfg),
		queueTimeout: cfg.Limits.QueueTimeout.D(),
		penalty:      time.Duration(cfg.Limits.PenaltySeconds) * time.Second,
		global:       windowed(rates{rateOf(cfg.Limits.RPM), rateOf(cfg.Limits.TPM)}, cfg.Limits.Window),
		providers:    map[string]*providerInfo{},
		maxRetained:  cfg.Spend.MaxRetainedAttempts,
	}
	c.gmu.Lock()
	next := map[string]*limit.Gate{}
	for name, p := range cfg.Providers {
		fam, hosted := s.catalog.FamilyOf(p.Type, p.BaseURL)
		s.providers[name] = newProviderInfo(providerInfo{name: name, typ: p.Type, rates: windowed(rates{rateOf(p.RPM), rateOf(p.TPM)}, cfg.Limits.Window),
			family: fam, hosted: hosted})
		if p.MaxConcurrency == nil {
			continue
		}
		g := c.gates[name]
		if g == nil {
			g = limit.NewGate(c.clk, *p.MaxConcurrency)
		}
		g.SetCapacity(*p.MaxConcurrency)
		next[name] = g
	}
	c.gates = next
	c.gmu.Unlock()
	c.reqGate.SetCapacity(max(cfg.Limits.MaxConcurrency, 1))
	c.snap.Store(s)
	return nil
}

func (c *Controller) providerGates() map[string]*limit.Gate {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	out := make(map[string]*limit.Gate, len(c.gates))
	for k, v := range c.gates {
		out[k] = v
	}
	return out
}

func (c *Controller) gate(provider string) *limit.Gate {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	return c.gates[provider]
}

// Authenticate maps a presented gateway key (from Authorization: Bearer,
// x-api-key or x-goog-api-key) to its identity. With neither auth.token
// nor keys configured, auth is off: (nil, true). An unknown key is
// (nil, false), an expired one (its identity, false); both are counted as
// unauthorized rejections.
func (c *Controller) Authenticate(presentedKey string) (*tenant.Identity, bool) {
	s := c.snap.Load()
	if s == nil || !s.keys.Enabled() {
		return nil, true
	}
	id, ok := s.keys.Lookup(presentedKey)
	if ok && !id.ExpiresAt.IsZero() && id.Expired(c.clk.Now()) { // the clock is read for keys that expire only
		ok = false // id is still returned, so that the answer can say why
	}
	if !ok {
		c.m.rejected.WithLabelValues("", ReasonUnauthorized).Inc()
	}
	return id, ok
}

// SetIssued swaps in the keys and tenants issued at runtime (the admin
// API), merged with the config's keys into a new key table; requests read
// the table from an atomic snapshot, so no lock is taken per request.
func (c *Controller) SetIssued(is *tenant.Issued) {
	c.kmu.Lock()
	defer c.kmu.Unlock()
	c.issued = is
	old := c.snap.Load()
	if old == nil {
		return // Configure compiles it
	}
	next := *old
	next.keys = tenant.Compile(&old.cfg.Auth, is)
	c.snap.Store(&next)
}

// Keys is the key table in force (nil before Configure).
func (c *Controller) Keys() *tenant.Table {
	if s := c.snap.Load(); s != nil {
		return s.keys
	}
	return nil
}

// AuthenticateDigest is Authenticate for a key known by its hex SHA-256
// digest (a queued job's). With auth off every digest is accepted.
func (c *Controller) AuthenticateDigest(hexDigest string) (*tenant.Identity, bool) {
	s := c.snap.Load()
	if s == nil || !s.keys.Enabled() {
		return nil, true
	}
	var d [32]byte
	if n, err := hex.Decode(d[:], []byte(hexDigest)); err != nil || n != 32 {
		return nil, false
	}
	return s.keys.LookupDigest(d)
}

// retryAfter rounds a wait up to whole seconds, at least 1.
func retryAfter(d time.Duration) int {
	return int(max(1, math.Ceil(d.Seconds())))
}

// Enter takes the logical request's slot (limits.max_concurrency), waiting
// at most limits.queue_timeout. The slot is held until release is called:
// at the end of the response, or of the stream. A saturated gate gives a
// 503 overloaded refusal with Retry-After; a caller that leaves while
// waiting gets CodeCanceled.
func (c *Controller) Enter(ctx context.Context, id *tenant.Identity) (release func(), _ *Refusal) {
	s := c.snap.Load()
	if s == nil {
		return func() {}, nil
	}
	rel, waited, err := c.reqGate.Acquire(ctx, s.queueTimeout)
	c.m.queueWait.WithLabelValues("request").Observe(waited.Seconds())
	if err != nil {
		return nil, c.gateRefusal(err, "", s.queueTimeout, ScopeRequest, "the gateway is at its concurrency limit")
	}
	return rel, nil
}

func (c *Controller) gateRefusal(err error, provider string, timeout time.Duration, scope Scope, msg string) *Refusal {
	if !errors.Is(err, limit.ErrSaturated) {
		return &Refusal{Status: 499, Code: CodeCanceled, Type: "request_canceled", Message: "the request was canceled while queued", Scope: ScopeRequest}
	}
	c.m.rejected.WithLabelValues(provider, ReasonOverloaded).Inc()
	return &Refusal{Status: 503, Code: CodeOverloaded, Type: "server_error", Scope: scope, RetryAfter: retryAfter(timeout),
		Message: msg + "; retry later"}
}

// Penalize slows a provider down after an upstream 429: its buckets refuse
// every attempt for limits.penalty_seconds. When the provider stated a
// shorter wait (Retry-After, reset headers), pass it: the penalty then
// lasts that long, so the gateway is never stricter than the provider.
// Call it for a provider-wide 429 only; with api_keys, a 429 of one key
// is the key's quota pause, not the provider's.
func (c *Controller) Penalize(provider string, stated ...time.Duration) {
	s := c.snap.Load()
	if s == nil || s.penalty <= 0 {
		return
	}
	d := s.penalty
	for _, w := range stated {
		if w > 0 {
			d = min(d, w)
		}
	}
	now := c.clk.Now()
	_ = c.st.Penalize(context.Background(), now, groupOf(provider), now.Add(d))
}

func groupOf(provider string) string { return "p:" + provider }
