package metrics

import "github.com/prometheus/client_golang/prometheus"

// newModelFallbacks counts requests handed from a model to one of its
// fallback models, by the condition that did it (error, context_window,
// content_policy, rate_limit, budget). Labels are config names: bounded.
func newModelFallbacks(r prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_model_fallbacks_total",
		Help: "Requests handed from a model to a fallback model, by condition.",
	}, []string{"model", "fallback", "condition"})
	r.MustRegister(c)
	return c
}
