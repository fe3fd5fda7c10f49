// Package alerts sends events that should reach a person to a webhook:
// a budget crossing a threshold (per tenant, and per issued key with a
// budget of its own), a provider's circuit opening, the dead-letter queue
// growing. Each delivery is signed (HMAC-SHA256, see webhook.go), retried
// with backoff, and sent once across a fleet: the replica that first
// claims the event's key sends it (Claims: Redis SET NX, or the SQLite
// file, or memory for one process).
//
// Nothing here runs on a request's path: a request's end only marks its
// caller for the next budget check (Note), a circuit transition is queued
// without waiting (Transition), and one goroutine checks and delivers.
package alerts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/internal/admit"
	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/health"
	"switchboard/internal/spend"
	"switchboard/internal/tenant"
)

// Event is one alert as delivered (the POST's JSON body).
type Event struct {
	// ID is the same on every replica for one event (a receiver may
	// dedupe on it); Type one of config.AlertEvents.
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Time    time.Time `json:"time"`
	Message string    `json:"message"`
	// budget.threshold: whose budget (scope tenant or key), the threshold
	// crossed and where the window stands. Used is the settled spend: a
	// reservation held by a request in flight is shown (reserved_usd) but
	// not counted, or one large request would cross thresholds it may
	// never spend.
	Scope        string      `json:"scope,omitempty"`
	Tenant       string      `json:"tenant,omitempty"`
	KeyID        string      `json:"key_id,omitempty"`
	ThresholdPct float64     `json:"threshold_pct,omitempty"`
	UsedPct      float64     `json:"used_pct,omitempty"`
	BudgetUSD    json.Number `json:"budget_usd,omitempty"`
	SettledUSD   json.Number `json:"settled_usd,omitempty"`
	ReservedUSD  json.Number `json:"reserved_usd,omitempty"`
	WindowStart  *time.Time  `json:"window_start,omitempty"`
	WindowEnd    *time.Time  `json:"window_end,omitempty"`
	// circuit.open: the provider.
	Provider string `json:"provider,omitempty"`
	// queue.dlq: the dead-letter queue's size now and at the last check.
	DLQSize     *int64 `json:"dlq_size,omitempty"`
	DLQPrevious *int64 `json:"dlq_previous,omitempty"`

	// claim is the event's key in Claims.
	claim string
}

// Spend reads where a caller stands (the admission controller).
type Spend interface {
	Usage(ctx context.Context, id *tenant.Identity, o admit.UsageOptions) (*admit.UsageView, error)
}

// Options are a Notifier's parts; the zero value of each is documented.
type Options struct {
	Clock clock.Clock // default the wall clock
	Log   *slog.Logger
	// Claims decide who sends (default MemoryClaims).
	Claims Claims
	// Spend reads budgets (nil: no budget alerts).
	Spend Spend
	// DLQ reads the dead-letter queue's size (nil: no queue alerts).
	DLQ func(ctx context.Context) (int64, error)
	// Record is told of each claimed event and whether it was delivered
	// (the audit log); nil records nothing.
	Record func(ctx context.Context, ev Event, delivered bool, attempts int, why string)
	// Registerer takes switchboard_alerts_total.
	Registerer prometheus.Registerer
	// Backoff is the first retry's wait, doubled each time up to
	// maxBackoff (default 1 s).
	Backoff time.Duration
}

// Bounds.
const (
	maxBackoff = time.Minute
	// queueSize bounds the events waiting for delivery; beyond, an event
	// is dropped (its claim released, so a later check retries it).
	queueSize = 256
	// maxChecks bounds the callers whose budget one pass reads; the rest
	// wait for the next pass.
	maxChecks = 1000
	// opTimeout bounds a claim or a budget read.
	opTimeout = 5 * time.Second
)

// Notifier checks and delivers. Create it with New, Configure it, Run it.
type Notifier struct {
	o   Options
	cfg atomic.Pointer[config.Alerts]
	// dirty holds the callers with requests since the last pass, by
	// tenant and key (sync.Map: a request marks its caller without a lock
	// once the caller is in it).
	dirty sync.Map
	// claimed remembers the events this replica has claimed until their
	// claims expire, so a pass asks Claims about a threshold once.
	mu      sync.Mutex
	claimed map[string]time.Time
	dlqSeen *int64
	// circuits receives opened circuits from the health hook.
	circuits chan health.Transition
	queue    chan *Event
	client   atomic.Pointer[http.Client]
	counts   *prometheus.CounterVec
}

// New makes a notifier (off until Configure gives it a URL).
func New(o Options) *Notifier {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Claims == nil {
		o.Claims = &MemoryClaims{Clock: o.Clock}
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	n := &Notifier{o: o, claimed: map[string]time.Time{}, circuits: make(chan health.Transition, 64), queue: make(chan *Event, queueSize),
		counts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchboard_alerts_total",
			Help: "Alert events by type and outcome: sent (the webhook took it), failed (every retry failed), dropped (the delivery queue was full)."},
			[]string{"type", "outcome"})}
	n.cfg.Store(&config.Alerts{})
	if o.Registerer != nil {
		_ = o.Registerer.Register(n.counts)
	}
	return n
}

// Configure applies alerts: (every config applied).
func (n *Notifier) Configure(c config.Alerts) {
	n.cfg.Store(&c)
	if cl := n.client.Load(); cl == nil || cl.Timeout != c.Timeout.D() {
		// One client per timeout, not per delivery.
		n.client.Store(&http.Client{Timeout: c.Timeout.D(), CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a signed delivery is not re-sent elsewhere
		}})
	}
}

// Note marks a caller whose request just ended for the next budget check.
func (n *Notifier) Note(id *tenant.Identity) {
	if n == nil || id == nil || !(id.Budgeted() || id.KeyBudgetNano != nil) || !n.cfg.Load().Sends(config.AlertBudget) {
		return
	}
	n.dirty.Store(id.Tenant+"\x00"+id.KeyID, id)
}

// Transition takes the health registry's transitions (it may run under
// the registry's lock: it only queues). Only this replica's own opening
// counts; one adopted from the fleet was another replica's to send.
func (n *Notifier) Transition(t health.Transition) {
	if n == nil || t.Kind != health.EventCircuitOpen || t.Fleet || !n.cfg.Load().Sends(config.AlertCircuit) {
		return
	}
	select {
	case n.circuits <- t:
	default: // a storm of openings: the quiet period would drop them anyway
	}
}

// Run checks every alerts.check_interval and delivers until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	go n.deliver(ctx)
	for {
		t, stop := n.o.Clock.After(max(n.cfg.Load().CheckInterval.D(), time.Second)) // unconfigured: 0
		select {
		case <-ctx.Done():
			stop()
			return
		case tr := <-n.circuits:
			stop()
			n.circuit(ctx, tr)
		case <-t:
			n.Check(ctx)
		}
	}
}

// Check runs one pass: the budgets of the callers noted since the last
// pass, and the dead-letter queue.
func (n *Notifier) Check(ctx context.Context) {
	c := n.cfg.Load()
	if !c.On() {
		return
	}
	if c.Sends(config.AlertBudget) && n.o.Spend != nil {
		n.budgets(ctx, c)
	}
	if c.Sends(config.AlertDLQ) && n.o.DLQ != nil {
		n.dlq(ctx, c)
	}
}

// budgets reads the noted callers' budgets and claims every threshold
// crossed in the current window.
func (n *Notifier) budgets(ctx context.Context, c *config.Alerts) {
	var ids []*tenant.Identity
	n.dirty.Range(func(k, v any) bool {
		n.dirty.Delete(k)
		id := v.(*tenant.Identity)
		ids = append(ids, id)
		return len(ids) < maxChecks
	})
	tenants := map[string]bool{}
	for _, id := range ids {
		rctx, cancel := context.WithTimeout(ctx, opTimeout)
		v, err := n.o.Spend.Usage(rctx, id, admit.UsageOptions{Key: true})
		cancel()
		if err != nil {
			n.dirty.Store(id.Tenant+"\x00"+id.KeyID, id) // the store is down: next pass
			continue
		}
		if id.Budgeted() && !tenants[id.Tenant] {
			tenants[id.Tenant] = true // one read per tenant is enough
			n.thresholds(ctx, c, "tenant", id, v.Spend)
		}
		if v.Key != nil && id.KeyBudgetNano != nil {
			n.thresholds(ctx, c, "key", id, v.Key.Spend)
		}
	}
}

// thresholds claims and queues each threshold sv has crossed.
func (n *Notifier) thresholds(ctx context.Context, c *config.Alerts, scope string, id *tenant.Identity, sv *admit.SpendView) {
	if sv == nil || sv.BudgetNano == nil {
		return
	}
	budget, used := *sv.BudgetNano, sv.SettledNano
	pct := 100.0
	if budget > 0 {
		pct = float64(used) / float64(budget) * 100
	} else if used == 0 {
		return // a budget of 0 freezes the caller: nothing to warn of
	}
	who := id.Label()
	if scope == "key" {
		who = id.KeyID
	}
	now := n.o.Clock.Now()
	end := time.Unix(sv.WindowEnd, 0)
	for _, th := range c.Thresholds {
		if pct < th {
			continue
		}
		key := fmt.Sprintf("budget:%s:%s:%d:%s", scope, who, sv.WindowStart, strconv.FormatFloat(th, 'f', -1, 64))
		// The claim outlives the window a little: a late replica in the
		// same window finds it taken.
		ttl := end.Sub(now) + time.Minute
		ws, we := time.Unix(sv.WindowStart, 0).UTC(), end.UTC()
		ev := &Event{Type: config.AlertBudget, Scope: scope, Tenant: id.Label(), ThresholdPct: th, UsedPct: math.Round(pct*100) / 100,
			BudgetUSD: json.Number(spend.FormatUSD(budget)), SettledUSD: json.Number(spend.FormatUSD(sv.SettledNano)),
			ReservedUSD: json.Number(spend.FormatUSD(sv.ReservedNano)), WindowStart: &ws, WindowEnd: &we,
			Message: fmt.Sprintf("%s %s has used %.1f%% of its budget of $%s (threshold %g%%) in the window ending %s",
				scope, who, pct, spend.FormatUSD(budget), th, we.Format(time.RFC3339))}
		if scope == "key" {
			ev.KeyID = id.KeyID
		}
		n.claim(ctx, key, ttl, ev)
	}
}

// circuit claims a provider's opened circuit, once per quiet period.
func (n *Notifier) circuit(ctx context.Context, t health.Transition) {
	c := n.cfg.Load()
	if !c.Sends(config.AlertCircuit) {
		return
	}
	n.claim(ctx, "circuit:"+t.Provider, c.QuietPeriod.D(), &Event{Type: config.AlertCircuit, Provider: t.Provider,
		Message: fmt.Sprintf("provider %s: its circuit opened at %s (consecutive failures); requests go to the other providers until it closes",
			t.Provider, t.Time.UTC().Format(time.RFC3339))})
}

// dlq reads the dead-letter queue and claims its growth since the last
// check, once per quiet period. The first read only sets the baseline.
func (n *Notifier) dlq(ctx context.Context, c *config.Alerts) {
	rctx, cancel := context.WithTimeout(ctx, opTimeout)
	size, err := n.o.DLQ(rctx)
	cancel()
	if err != nil {
		return
	}
	prev := n.dlqSeen
	n.dlqSeen = &size
	if prev == nil || size <= *prev {
		return
	}
	p := *prev
	n.claim(ctx, "dlq", c.QuietPeriod.D(), &Event{Type: config.AlertDLQ, DLQSize: &size, DLQPrevious: &p,
		Message: fmt.Sprintf("the dead-letter queue grew from %d to %d jobs; see switchboard queue dlq", p, size)})
}

// claim queues ev when this replica is the first to claim key.
func (n *Notifier) claim(ctx context.Context, key string, ttl time.Duration, ev *Event) {
	now := n.o.Clock.Now()
	n.mu.Lock()
	if u, ok := n.claimed[key]; ok && now.Before(u) {
		n.mu.Unlock()
		return
	}
	for k, u := range n.claimed {
		if !now.Before(u) {
			delete(n.claimed, k)
		}
	}
	n.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	ok, err := n.o.Claims.Claim(cctx, key, ttl)
	cancel()
	if err != nil {
		n.o.Log.Warn("alerts: cannot claim an event; the next check tries again", "event", ev.Type, "error", err.Error())
		return
	}
	n.mu.Lock()
	n.claimed[key] = now.Add(ttl) // taken, by this replica or another
	n.mu.Unlock()
	if !ok {
		return
	}
	sum := sha256.Sum256([]byte(key))
	ev.ID, ev.Time, ev.claim = "alert_"+hex.EncodeToString(sum[:12]), now.UTC(), key
	select {
	case n.queue <- ev:
	default:
		n.counts.WithLabelValues(ev.Type, "dropped").Inc()
		n.unclaim(ev)
	}
}

// unclaim gives an undelivered event's claim back, here and in Claims.
func (n *Notifier) unclaim(ev *Event) {
	n.mu.Lock()
	delete(n.claimed, ev.claim)
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	_ = n.o.Claims.Release(ctx, ev.claim)
	cancel()
}

// deliver sends queued events one at a time until ctx ends.
func (n *Notifier) deliver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-n.queue:
			n.send(ctx, ev)
		}
	}
}

// send delivers ev with retries; an event never delivered is released
// for a later check, and either way it is recorded.
func (n *Notifier) send(ctx context.Context, ev *Event) {
	c := n.cfg.Load()
	body, _ := json.Marshal(ev)
	var err error
	attempts := 0
	wait := n.o.Backoff
	for attempts <= *c.Retries {
		attempts++
		actx, cancel := context.WithTimeout(ctx, c.Timeout.D())
		err = post(actx, n.client.Load(), c.URL, []byte(c.Secret), ev, body, n.o.Clock.Now())
		cancel()
		de, _ := err.(*deliveryError)
		if err == nil || de != nil && !de.retry || attempts > *c.Retries {
			break
		}
		t, stop := n.o.Clock.After(wait)
		select {
		case <-t:
		case <-ctx.Done():
			stop()
			n.unclaim(ev)
			return
		}
		wait = min(wait*2, maxBackoff)
	}
	why := ""
	if err != nil {
		why = err.Error()
		n.counts.WithLabelValues(ev.Type, "failed").Inc()
		n.o.Log.Warn("alerts: the webhook did not take an event; a later check sends it again", "event", ev.Type, "id", ev.ID,
			"attempts", attempts, "error", why)
		n.unclaim(ev)
	} else {
		n.counts.WithLabelValues(ev.Type, "sent").Inc()
		n.o.Log.Info("alert sent", "event", ev.Type, "id", ev.ID, "message", ev.Message)
	}
	if n.o.Record != nil {
		n.o.Record(context.WithoutCancel(ctx), *ev, err == nil, attempts, why)
	}
}
