package admit

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/internal/store"
)

// Rejection reasons (the reason label of switchboard_rejected_total).
const (
	ReasonOverloaded   = "overloaded"
	ReasonRateLimited  = "rate_limited"
	ReasonTenantQuota  = "tenant_quota"
	ReasonUnauthorized = "unauthorized"
	ReasonBudget       = "tenant_budget"
	ReasonUnpriceable  = "unpriceable_under_budget"
)

// metrics are the admission collectors. Labels are bounded: provider,
// model and tenant names come from the config, reasons from the list
// above.
type metrics struct {
	queueWait *prometheus.HistogramVec
	rejected  *prometheus.CounterVec
	admitted  *prometheus.CounterVec
	reserved  *prometheus.GaugeVec
	settled   *prometheus.CounterVec
	unpriced  *prometheus.CounterVec
	skipped   *prometheus.CounterVec
	settleErr prometheus.Counter
	// budgetUsed is spent/budget of a budgeted tenant's current window, as
	// the store reported it (fleet-wide with Redis) at the tenant's latest
	// admission decision; it is what an alert on a nearly spent budget
	// reads. Several keys of one tenant share the label: the latest wins.
	budgetUsed *prometheus.GaugeVec
	// overBound counts answers whose output passed the output bound their
	// reservation covered: a stream cut there, or a unary answer charged
	// in full.
	overBound *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, gates prometheus.Collector, st store.Store) *metrics {
	m := &metrics{
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchboard_admission_queue_wait_seconds", Help: "Time spent waiting for a concurrency slot (scope request or provider).",
			Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"scope"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_rejected_total", Help: "Requests or attempts refused by the gateway, by reason.",
		}, []string{"provider", "reason"}),
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_admitted_total", Help: "Provider attempts admitted (dispatched).",
		}, []string{"provider"}),
		reserved: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_spend_reserved_nano_usd", Help: "Spend held by attempts not yet settled, in nano-USD.",
		}, []string{"tenant", "provider"}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_spend_settled_nano_usd_total", Help: "Spend settled on reported usage, in nano-USD.",
		}, []string{"tenant", "provider"}),
		unpriced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_unpriced_under_cap_total", Help: "Unpriceable attempts admitted under a budget by holding the remaining balance.",
		}, []string{"provider", "model"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_budget_skipped_total",
			Help: "Provider entries passed over for a budgeted key: reason unpriceable_under_budget (cost cannot be bounded) or request_exceeds_budget.",
		}, []string{"provider", "model", "reason"}),
		settleErr: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_spend_settle_errors_total", Help: "Settlements the store failed to apply (the reservation stays).",
		}),
		budgetUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_budget_used_ratio", Help: "Spent (reserved + settled) over budget in the tenant's current window, as of its latest admission decision.",
		}, []string{"tenant"}),
		overBound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_output_over_bound_total",
			Help: "Answers whose output passed the output bound their budget reservation covered: outcome cut (a stream ended there) or charged (a unary answer, charged in full).",
		}, []string{"provider", "model", "outcome"}),
	}
	if reg == nil {
		return m
	}
	m.queueWait = register(reg, m.queueWait)
	m.rejected = register(reg, m.rejected)
	m.admitted = register(reg, m.admitted)
	m.reserved = register(reg, m.reserved)
	m.settled = register(reg, m.settled)
	m.unpriced = register(reg, m.unpriced)
	m.skipped = register(reg, m.skipped)
	m.settleErr = register(reg, m.settleErr)
	m.budgetUsed = register(reg, m.budgetUsed)
	m.overBound = register(reg, m.overBound)
	register(reg, gates)
	if hc, ok := st.(store.HoldCounter); ok {
		register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchboard_spend_live_holds",
			Help: "Budgeted attempts admitted and not yet ended (their live holds, bounded by spend.max_retained_attempts; fleet-wide with Redis). -1 when the store cannot be read.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			n, err := hc.LiveHolds(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}))
	}
	return m
}

// register adds c to reg, or returns the collector already registered
// under its name (a second Controller on one registry shares them).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(C); ok {
				return old
			}
		}
		panic(err)
	}
	return c
}

// gateCollector reports the concurrency gates at scrape time.
type gateCollector struct {
	c        *Controller
	inflight *prometheus.Desc
	depth    *prometheus.Desc
}

func newGateCollector(c *Controller) *gateCollector {
	return &gateCollector{
		c: c,
		inflight: prometheus.NewDesc("switchboard_admission_inflight",
			"Concurrency slots in use: scope request (logical requests) or provider (attempts).", []string{"scope", "provider"}, nil),
		depth: prometheus.NewDesc("switchboard_admission_queue_depth",
			"Callers waiting for a concurrency slot.", []string{"scope", "provider"}, nil),
	}
}

func (g *gateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.inflight
	ch <- g.depth
}

func (g *gateCollector) Collect(ch chan<- prometheus.Metric) {
	in, w := g.c.reqGate.Load()
	ch <- prometheus.MustNewConstMetric(g.inflight, prometheus.GaugeValue, float64(in), "request", "")
	ch <- prometheus.MustNewConstMetric(g.depth, prometheus.GaugeValue, float64(w), "request", "")
	for name, gate := range g.c.providerGates() {
		in, w := gate.Load()
		ch <- prometheus.MustNewConstMetric(g.inflight, prometheus.GaugeValue, float64(in), "provider", name)
		ch <- prometheus.MustNewConstMetric(g.depth, prometheus.GaugeValue, float64(w), "provider", name)
	}
}
