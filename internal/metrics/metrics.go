// Package metrics holds the gateway's Prometheus collectors. Labels stay
// bounded: routes, statuses, provider and model names from the config,
// reasons from a fixed list; never a request id or user text.
package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one registry with the gateway's collectors.
type Metrics struct {
	Registry *prometheus.Registry

	Requests        *prometheus.CounterVec
	RequestDuration *prometheus.HistogramVec
	InFlight        prometheus.Gauge
	ProviderSuccess *prometheus.CounterVec
	ProviderFailure *prometheus.CounterVec
	QuotaPaused     *prometheus.CounterVec
	UpstreamTTFT    *prometheus.HistogramVec
	UpstreamTPS     *prometheus.HistogramVec
	Probes          *prometheus.CounterVec
	// Streams counts relayed streams by how they ended: completed,
	// failed, timeout (timeouts.stream), abandoned (by the client) or cut
	// (by the shutdown drain bound).
	Streams *prometheus.CounterVec
	// Queue counts distributed execution and idempotent replays.
	Queue QueueCounters
	// ModelFallbacks counts cross-model fallbacks (fallback.go).
	ModelFallbacks *prometheus.CounterVec
	// Hedge counts hedged attempts, their winners and their waste.
	Hedge HedgeCounters
}

// New registers the collectors on a fresh registry.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_requests_total", Help: "Client requests by route and HTTP status.",
		}, []string{"route", "status"}),
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchboard_request_duration_seconds", Help: "Client request duration, streams until their end.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"route"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_inflight_requests", Help: "Client requests being served.",
		}),
		ProviderSuccess: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_provider_success_total", Help: "Successful provider attempts.",
		}, []string{"provider", "model"}),
		ProviderFailure: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_provider_failure_total", Help: "Failed provider attempts by reason.",
		}, []string{"provider", "model", "reason"}),
		QuotaPaused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_provider_quota_paused_total", Help: "Quota pauses by reason.",
		}, []string{"provider", "model", "reason"}),
		UpstreamTTFT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchboard_upstream_ttft_seconds", Help: "Time to first token of upstream streams.",
			Buckets: []float64{0.1, 0.5, 1, 5, 10, 30, 60, 300},
		}, []string{"provider", "model"}),
		UpstreamTPS: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchboard_upstream_tokens_per_second", Help: "Completion tokens per second of upstream streams (the provider's own timing when reported).",
			Buckets: []float64{5, 10, 25, 50, 100, 200, 400, 800, 1600},
		}, []string{"provider", "model"}),
		Probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_probes_total", Help: "Background probes by outcome.",
		}, []string{"model", "provider", "outcome"}),
		Streams: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_streams_total", Help: "Relayed streams by how they ended: completed, failed, timeout, abandoned, cut.",
		}, []string{"provider", "model", "outcome"}),
	}
	r.MustRegister(m.Probes, m.Requests, m.RequestDuration, m.InFlight, m.ProviderSuccess, m.ProviderFailure,
		m.QuotaPaused, m.UpstreamTTFT, m.UpstreamTPS, m.Streams,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Queue = newQueueCounters(r)
	m.ModelFallbacks = newModelFallbacks(r)
	m.Hedge = newHedgeCounters(r)
	return m
}

// Handler serves the exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// Status is a status code as a label value.
func Status(code int) string { return strconv.Itoa(code) }

// ProviderState is one provider's health as gauges.
type ProviderState struct {
	Provider    string
	CircuitOpen bool
	Paused      bool
}

// stateCollector reads provider health at scrape time, so the gauges never
// drift from the breaker's own state.
type stateCollector struct {
	circuit, paused *prometheus.Desc
	read            func() []ProviderState
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.circuit; ch <- c.paused }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for _, p := range c.read() {
		ch <- prometheus.MustNewConstMetric(c.circuit, prometheus.GaugeValue, b(p.CircuitOpen), p.Provider)
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, b(p.Paused), p.Provider)
	}
}

// WatchProviders registers gauges of circuit and pause state, read by read.
func (m *Metrics) WatchProviders(read func() []ProviderState) {
	m.Registry.MustRegister(&stateCollector{
		circuit: prometheus.NewDesc("switchboard_provider_circuit_open", "1 while the provider's circuit is open.", []string{"provider"}, nil),
		paused:  prometheus.NewDesc("switchboard_provider_quota_paused", "1 while the provider is quota-paused.", []string{"provider"}, nil),
		read:    read,
	})
}

// WatchRedis exports switchboard_redis_up: 1 while the fleet's Redis
// answers, 0 while this replica runs on its own fallbacks (rate limits in
// process, budgeted requests refused).
func (m *Metrics) WatchRedis(up func() bool) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_redis_up", Help: "1 while the shared Redis answers, 0 while this replica runs on its fallbacks.",
	}, func() float64 {
		if up() {
			return 1
		}
		return 0
	}))
}
