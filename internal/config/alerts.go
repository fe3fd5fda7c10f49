package config

import (
	"net/url"
	"slices"
	"time"
)

// Alerts sends events to a webhook (see docs/alerts.md): a budget
// crossing a threshold, a provider's circuit opening, the dead-letter
// queue growing. Each is signed (HMAC-SHA256 of timestamp and body) and
// sent once across a fleet.
type Alerts struct {
	// URL receives each event as a POST of JSON; empty = alerts off
	// (default).
	URL string `yaml:"url"`
	// Secret signs every delivery; required with url, at least 16 bytes
	// (use ${ENV}).
	Secret string `yaml:"secret"`
	// Events sent; default all of budget.threshold, circuit.open and
	// queue.dlq.
	Events []string `yaml:"events"`
	// Thresholds are the percentages of a budget (per window, per tenant
	// and per issued key with a budget of its own) that send
	// budget.threshold. Default [50, 80, 100]; 1 to 10 values, each
	// 1..1000.
	Thresholds []float64 `yaml:"thresholds"`
	// Timeout bounds one delivery attempt. Default 5 s, range 100 ms..60 s.
	Timeout Duration `yaml:"timeout"`
	// Retries after a failed delivery (a transport error, 429 or 5xx),
	// with exponential backoff from 1 s capped at 60 s. Default 5, range
	// 0..20.
	Retries *int `yaml:"retries"`
	// CheckInterval is how often the budgets of callers that made
	// requests are read. Default 10 s, range 1 s..1 h.
	CheckInterval Duration `yaml:"check_interval"`
	// QuietPeriod: a circuit.open alert per provider, and a queue.dlq
	// alert, are sent at most once per period across the fleet. Default
	// 15 m, range 1 m..24 h.
	QuietPeriod Duration `yaml:"quiet_period"`
}

// Alert event types.
const (
	AlertBudget  = "budget.threshold"
	AlertCircuit = "circuit.open"
	AlertDLQ     = "queue.dlq"
)

// AlertEvents lists every event type.
var AlertEvents = []string{AlertBudget, AlertCircuit, AlertDLQ}

// On reports whether alerts are sent.
func (a *Alerts) On() bool { return a.URL != "" }

// Sends reports whether event type ev is sent.
func (a *Alerts) Sends(ev string) bool { return a.On() && slices.Contains(a.Events, ev) }

func (l *loader) alertsDefaults(c *Config) {
	a := &c.Alerts
	setDefault(l, "alerts.events", &a.Events, slices.Clone(AlertEvents))
	setDefault(l, "alerts.thresholds", &a.Thresholds, []float64{50, 80, 100})
	setDefault(l, "alerts.timeout", &a.Timeout, Duration(5*time.Second))
	if a.Retries == nil {
		a.Retries = intPtr(5)
	}
	setDefault(l, "alerts.check_interval", &a.CheckInterval, Duration(10*time.Second))
	setDefault(l, "alerts.quiet_period", &a.QuietPeriod, Duration(15*time.Minute))
}

func (l *loader) validateAlerts(c *Config) {
	a := &c.Alerts
	if a.URL != "" {
		if u, err := url.Parse(a.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			l.errAt("alerts.url", "want an http:// or https:// URL, got %s", redactURL(a.URL))
		}
		if len(a.Secret) < 16 {
			l.errAt("alerts.secret", "required with alerts.url: at least 16 bytes that the receiver also holds, to verify each delivery's signature")
		}
	}
	for i, ev := range a.Events {
		if !slices.Contains(AlertEvents, ev) {
			l.errAt("alerts.events", "unknown event %q; known: budget.threshold, circuit.open, queue.dlq", ev)
		} else if slices.Contains(a.Events[:i], ev) {
			l.errAt("alerts.events", "event %q is listed twice", ev)
		}
	}
	if n := len(a.Thresholds); n < 1 || n > 10 {
		l.errAt("alerts.thresholds", "want 1 to 10 percentages, got %d", n)
	}
	for i, t := range a.Thresholds {
		if !(t >= 1 && t <= 1000) {
			l.errAt("alerts.thresholds", "each must be a percentage from 1 to 1000, got %g", t)
		} else if slices.Contains(a.Thresholds[:i], t) {
			l.errAt("alerts.thresholds", "%g is listed twice", t)
		}
	}
	l.durRange("alerts.timeout", a.Timeout, 100*time.Millisecond, time.Minute)
	l.intRange("alerts.retries", int64(*a.Retries), 0, 20)
	l.durRange("alerts.check_interval", a.CheckInterval, time.Second, time.Hour)
	l.durRange("alerts.quiet_period", a.QuietPeriod, time.Minute, day)
}
