// Package server is Switchboard's HTTP front. It assembles the gateway:
// it builds the planes (inference, operator, queue dispatch) over the
// shared state (provider health, routing stats, admission, the attempt
// loop), compiles each applied config into the snapshot every request
// reads (swapped atomically: no lock on the request path), and serves
// them: the route table, the middleware (request id, recovery, access log,
// connection cap), authentication (gateway keys, the admin guard, the
// metrics token), /health, /ready and /metrics, graceful shutdown, and the
// provider state kept across restarts. A plane's handler gets the snapshot
// and the caller's identity from it and never calls back into it. It may
// call every package below it; only cmd/switchboard calls it.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"switchboard/internal/admin"
	"switchboard/internal/admit"
	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/connlimit"
	"switchboard/internal/dispatch"
	"switchboard/internal/health"
	"switchboard/internal/idempotency"
	"switchboard/internal/inference"
	"switchboard/internal/metrics"
	"switchboard/internal/operator"
	"switchboard/internal/provider"
	"switchboard/internal/provider/anthropic"
	"switchboard/internal/provider/azure"
	"switchboard/internal/provider/bedrock"
	"switchboard/internal/provider/gemini"
	"switchboard/internal/provider/mock"
	"switchboard/internal/provider/openai"
	"switchboard/internal/provider/vertex"
	"switchboard/internal/proxy"
	"switchboard/internal/queue"
	"switchboard/internal/route"
	"switchboard/internal/snapshot"
	"switchboard/internal/store"
	"switchboard/internal/tags"
	"switchboard/internal/usagelog"
)

// Server is the gateway. Create it with New, then Apply a config.
type Server struct {
	Log     *slog.Logger
	Clock   clock.Clock
	Health  *health.Registry
	Metrics *metrics.Metrics
	Stats   *route.Stats
	Prober  *route.Prober
	// Admission authenticates callers and admits attempts (rate limits,
	// concurrency, spend). Set it before the first Apply to choose its
	// store; Apply creates an in-memory one when it is nil.
	Admission *admit.Controller

	snap atomic.Pointer[snapshot.Snapshot]
	// queueing is distributed execution (nil with queue.mode off).
	queueing *dispatch.Plane
	// inf is the inference plane: the /v1 model endpoints.
	inf *inference.Plane
	// op is the operator plane: admin API, dashboards, health detail.
	op *operator.Plane
	// usage is the per-request usage log (nil: off).
	usage atomic.Pointer[usagelog.Log]
	proxy *proxy.Proxy
	// selector applies each model's routing policy (its Busy is the
	// proxy's in-flight count).
	selector *route.Selector
	client   *http.Client
	draining atomic.Bool
	// cutting is set when the drain bound is reached and the remaining
	// connections are closed: streams ending then were cut, not abandoned.
	cutting atomic.Bool
	// stopping: shutdown began; /ready answers 503 while requests are
	// still served for timeouts.shutdown_delay, before draining.
	stopping atomic.Bool
	// conns caps the listener Serve accepts on (nil before Serve).
	conns atomic.Pointer[connlimit.Listener]

	// obs is tracing, tags and alerts (observe.go).
	obs observe

	mu        sync.Mutex // guards instances during Apply only
	reloadMu  sync.Mutex // serialises Reload
	instances map[string]instance
}

// instance is a provider built from one config; reused across reloads while
// the config is unchanged, so mock scripts and pools survive.
type instance struct {
	cfg config.Provider
	p   provider.Provider
}

// New builds a server; client is the shared upstream client (nil builds
// one from the first applied config's timeouts).
func New(log *slog.Logger, clk clock.Clock, client *http.Client) *Server {
	if clk == nil {
		clk = clock.Real{}
	}
	s := &Server{Log: log, Clock: clk, client: client, instances: map[string]instance{}}
	s.Health = health.New(clk, health.Settings{Threshold: 3, Window: time.Minute, Cooldown: time.Minute, DefaultPause: time.Minute})
	s.Health.OnTransition(s.logTransition)
	s.Metrics = metrics.New()
	s.obs.meter = tags.NewMeter(s.Metrics.Registry)
	s.Metrics.WatchProviders(s.providerStates)
	s.Stats = route.NewStats(clk, 5*time.Minute)
	s.Prober = &route.Prober{Stats: s.Stats, Health: s.Health, Clock: clk, Log: log,
		OnProbe: func(model, p string, ok bool) {
			outcome := "ok"
			if !ok {
				outcome = "failed"
			}
			s.Metrics.Probes.WithLabelValues(model, p, outcome).Inc()
		}}
	s.proxy = &proxy.Proxy{Clock: clk, Log: log, Health: s.Health, Metrics: s.Metrics, Stats: s.Stats,
		Buffers: provider.NewBudget(512 << 20)} // the configured limit is set by Apply
	s.selector = &route.Selector{Stats: s.Stats, Busy: &route.Busy{}}
	s.proxy.Busy = s.selector.Busy
	s.Prober.Serving = s.selector.Preferred // e.g. lowest_latency probes the others, not the one it uses
	s.inf = &inference.Plane{Log: log, Clock: clk, Metrics: s.Metrics, Stats: s.Stats, Prober: s.Prober, Selector: s.selector,
		Proxy: s.proxy, Snap: s.Snapshot, UsageLog: s.UsageLog, Cutting: s.cutting.Load,
		Meter: s.obs.meter, Alerts: s.obs.alerts.Load}
	s.op = &operator.Plane{Log: log, Clock: clk, Health: s.Health, Stats: s.Stats, Selector: s.selector,
		UsageLog: s.UsageLog, Draining: func() bool { return s.stopping.Load() || s.draining.Load() }}
	return s
}

// JoinFleet makes this server a replica of a fleet sharing rs: provider
// health is shared, and switchboard_redis_up reports whether Redis answers.
func (s *Server) JoinFleet(rs *store.Redis) {
	s.Health.SetShared(rs.Health())
	s.Metrics.WatchRedis(rs.Available)
}

// Apply validates nothing (config.Load did) and swaps in cfg atomically.
func (s *Server) Apply(cfg *config.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The upstream bounds and the connection age apply on reload too: the
	// pool swaps in a fresh transport for new requests when they change.
	copts := provider.ClientOptions{Open: cfg.Timeouts.Open.D(), Read: cfg.Timeouts.Read.D(),
		Write: cfg.Timeouts.Write.D(), MaxAge: cfg.Performance.ConnectionMaxAge.D()}
	if s.client == nil {
		s.client = provider.NewHTTPClient(copts)
	} else if pool, ok := s.client.Transport.(*provider.Pool); ok {
		pool.Configure(copts)
	}
	next := make(map[string]instance, len(cfg.Providers))
	table := route.Compile(cfg, func(pc *config.Provider) provider.Provider {
		if old, ok := s.instances[pc.Name]; ok && reflect.DeepEqual(old.cfg, *pc) {
			next[pc.Name] = old
			return old.p
		}
		p := s.build(pc)
		next[pc.Name] = instance{cfg: *pc, p: p}
		return p
	})
	s.instances = next
	b := cfg.Health.Breaker
	s.Health.Configure(health.Settings{Threshold: *b.Threshold, Window: b.Window.D(), Cooldown: b.Cooldown.D(),
		DefaultPause: time.Duration(cfg.Performance.QuotaPauseDefaultSeconds) * time.Second})
	s.admission()
	if s.op.Admin == nil {
		st, err := admin.OpenMemory()
		if err == nil {
			err = s.SetAdminStore(context.Background(), st)
		}
		if err != nil {
			s.Log.Error("admin store refused", "error", err.Error())
		}
	}
	if s.inf.Idempotency == nil {
		s.inf.Idempotency = idempotency.NewMemory(idempotency.LimitsOf(&cfg.Idempotency), nil)
	}
	if s.proxy.Admission != s.Admission {
		// Once, before the first request.
		s.proxy.Admission = s.Admission
		s.inf.Admission = s.Admission
		s.op.Admission = s.Admission
	}
	// Configure validates nothing new: config.Load already did.
	if err := s.Admission.Configure(cfg); err != nil {
		s.Log.Error("admission config refused", "error", err.Error())
	}
	if s.queueing != nil {
		s.queueing.Q.SetOptions(queue.OptionsOf(&cfg.Queue))
	}
	s.applyObserve(cfg)
	s.proxy.Buffers.SetLimit(cfg.Limits.MaxBufferedBytes)
	s.Stats.SetWindow(cfg.Performance.SampleWindow.D())
	s.Prober.SetMaxPerMinute(cfg.Performance.ProbeMaxPerMinute)
	snap := snapshot.New(cfg, table, s.Clock.Now())
	s.snap.Store(snap)
	if l := s.conns.Load(); l != nil {
		l.SetMax(maxConnections(cfg))
	}
	if l := s.UsageLog(); l != nil {
		l.SetRetention(cfg.UsageLog.Retention.D())
	}
}

// admission returns the Admission controller, creating an in-memory one
// when none was set.
func (s *Server) admission() *admit.Controller {
	if s.Admission == nil {
		s.Admission = admit.New(store.NewMemory(), s.Clock, s.Metrics.Registry)
	}
	return s.Admission
}

// maxConnections is limits.max_connections, or the default sized from the
// descriptor limit when omitted.
func maxConnections(cfg *config.Config) int {
	if n := cfg.Limits.MaxConnections; n > 0 {
		return n
	}
	return connlimit.DefaultMax()
}

// Spare connections beyond limits.max_connections serve /health and /ready
// only, for at most spareLife each.
const (
	spareConns = 32
	spareLife  = 5 * time.Second
)

func (s *Server) build(pc *config.Provider) provider.Provider {
	switch pc.Type {
	case config.TypeMock:
		return mock.New(pc.Name, *pc.Mock)
	case config.TypeAnthropic:
		return anthropic.New(pc, s.client)
	case config.TypeGemini:
		return gemini.New(pc, s.client)
	case config.TypeAzure:
		return azure.New(pc, s.client, s.Clock)
	case config.TypeBedrock:
		return bedrock.New(pc, s.client)
	case config.TypeVertex:
		return vertex.New(pc, s.client, s.Clock)
	}
	return openai.New(pc, s.client)
}

// Snapshot returns the current config snapshot (nil before the first Apply).
func (s *Server) Snapshot() *snapshot.Snapshot { return s.snap.Load() }

// Provider returns the live instance of a provider by name (tests script
// mock providers through it).
func (s *Server) Provider(name string) provider.Provider {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.instances[name].p
}

// Ready reports whether the server has a config and is not shutting down
// (in the shutdown delay or draining).
func (s *Server) Ready() bool {
	return s.snap.Load() != nil && !s.stopping.Load() && !s.draining.Load()
}

// Serve accepts on ln until ctx is done, then drains: it stops accepting,
// lets in-flight requests and streams finish for up to the configured
// shutdown bound, and returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	max := connlimit.DefaultMax()
	if snap := s.snap.Load(); snap != nil {
		max = maxConnections(snap.Config)
	}
	cl := connlimit.New(ln, max, spareConns, spareLife)
	s.conns.Store(cl)
	ln = cl
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.Log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ConnContext: func(c context.Context, nc net.Conn) context.Context {
			if connlimit.Spare(nc) {
				return context.WithValue(c, spareKey, true)
			}
			return c
		},
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// First only /ready turns 503, while everything is still served, so
	// that a load balancer takes this replica out before it stops
	// accepting; then the drain.
	s.stopping.Store(true)
	bound, delay := 30*time.Second, time.Duration(0)
	if snap := s.snap.Load(); snap != nil {
		bound, delay = snap.Config.Timeouts.Shutdown.D(), snap.Config.Timeouts.ShutdownDelay.D()
	}
	if delay > 0 {
		s.Log.Info("shutting down: not ready, still serving for timeouts.shutdown_delay", "delay", delay.String())
		t, stop := s.Clock.After(delay)
		select {
		case <-t:
		case err := <-errc:
			stop()
			return err
		}
	}
	s.draining.Store(true)
	s.Log.Info("shutting down: draining in-flight requests", "bound", bound.String())
	sctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	err := hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.Log.Warn("drain bound reached; closing remaining connections")
		s.cutting.Store(true)
		_ = hs.Close()
		return nil
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// Prewarm opens a connection to each remote provider origin (bounded by
// timeouts.open); failures are ignored.
func (s *Server) Prewarm() {
	snap := s.snap.Load()
	if snap == nil {
		return
	}
	var origins []string
	for _, p := range snap.Config.Providers {
		if p.Type != config.TypeMock && p.BaseURL != "" {
			origins = append(origins, p.BaseURL)
		}
	}
	provider.Prewarm(s.client, origins, snap.Config.Timeouts.Open.D())
}

// providerStates lists the configured providers' health for the gauges.
func (s *Server) providerStates() []metrics.ProviderState {
	snap := s.snap.Load()
	if snap == nil {
		return nil
	}
	out := make([]metrics.ProviderState, 0, len(snap.Config.Providers))
	for name := range snap.Config.Providers {
		h := s.Health.Status(name)
		out = append(out, metrics.ProviderState{Provider: name, CircuitOpen: h.CircuitOpen, Paused: !h.PausedUntil.IsZero()})
	}
	return out
}

// Reload loads path and applies it; an invalid file (or, when production,
// one without auth.token) is refused and the running config keeps serving.
func (s *Server) Reload(path string, production bool) (*config.Config, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	next, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if production && !next.Auth.Enabled() {
		return nil, errors.New("production mode (SWITCHBOARD_ENV or RACK_ENV) requires auth.token or gateway keys")
	}
	s.Apply(next)
	return next, nil
}
