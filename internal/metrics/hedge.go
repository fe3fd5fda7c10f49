package metrics

import "github.com/prometheus/client_golang/prometheus"

// HedgeCounters count hedged requests (see config.Hedge). Labels are
// config names: the model, and the provider the count is about.
type HedgeCounters struct {
	// Started counts extra attempts admitted and sent, by the hedge's
	// provider.
	Started *prometheus.CounterVec
	// Won counts races decided, by the winning provider and by which
	// attempt won: original or hedge.
	Won *prometheus.CounterVec
	// WastedTokens are the tokens losing attempts reported (a loser
	// canceled before it answered reports none), by the loser's provider.
	WastedTokens *prometheus.CounterVec
	// WastedNanoUSD is what losing attempts cost their budgets: settled
	// charges plus the reservations kept for canceled attempts.
	WastedNanoUSD *prometheus.CounterVec
}

func newHedgeCounters(r *prometheus.Registry) HedgeCounters {
	c := HedgeCounters{
		Started: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_hedges_started_total",
			Help: "Extra (hedged) attempts started because the running attempt was slow to answer, by the hedge's provider."}, []string{"model", "provider"}),
		Won: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_hedges_won_total",
			Help: "Hedged races decided, by the winning provider and whether the original or the hedge won."}, []string{"model", "provider", "by"}),
		WastedTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_hedge_wasted_tokens_total",
			Help: "Tokens reported by losing hedged attempts, by the loser's provider."}, []string{"model", "provider"}),
		WastedNanoUSD: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_hedge_wasted_nano_usd_total",
			Help: "Nano-USD losing hedged attempts cost their budgets (settled or kept reservations), by the loser's provider."}, []string{"model", "provider"}),
	}
	r.MustRegister(c.Started, c.Won, c.WastedTokens, c.WastedNanoUSD)
	return c
}
