package metrics

import "github.com/prometheus/client_golang/prometheus"

// QueueCounters count distributed-execution events on this replica; sum
// them over the fleet. Registered in every mode (they stay 0 with the
// queue off) so that alerts on them always have a series.
type QueueCounters struct {
	Redeliveries      prometheus.Counter
	LeaseLosses       prometheus.Counter
	Cancellations     prometheus.Counter
	IdempotentReplays prometheus.Counter
}

func newQueueCounters(r *prometheus.Registry) QueueCounters {
	c := QueueCounters{
		Redeliveries: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_queue_redeliveries_total",
			Help: "Jobs put back in their queue after a worker's lease expired (counted by the replica whose reaper did it)."}),
		LeaseLosses: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_queue_lease_losses_total",
			Help: "Deliveries on this worker that found their lease lost (a fenced transition refused them)."}),
		Cancellations: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_queue_cancellations_total",
			Help: "Jobs canceled: the client left, the deadline passed, or the origin went silent."}),
		IdempotentReplays: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchboard_idempotent_replays_total",
			Help: "Requests answered from a stored Idempotency-Key answer without calling a provider."}),
	}
	r.MustRegister(c.Redeliveries, c.LeaseLosses, c.Cancellations, c.IdempotentReplays)
	return c
}

// QueueState is the shared queue as read at scrape time.
type QueueState struct {
	Waiting map[string]int64
	Leased  int64
	DLQ     int64
}

type queueCollector struct {
	waiting, leased, dlq *prometheus.Desc
	read                 func() (QueueState, bool)
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.leased
	ch <- c.dlq
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	s, ok := c.read()
	if !ok {
		return // Redis did not answer: no sample rather than a false 0
	}
	for p, n := range s.Waiting {
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n), p)
	}
	ch <- prometheus.MustNewConstMetric(c.leased, prometheus.GaugeValue, float64(s.Leased))
	ch <- prometheus.MustNewConstMetric(c.dlq, prometheus.GaugeValue, float64(s.DLQ))
}

// WatchQueue registers the fleet-wide queue gauges, read at scrape time.
func (m *Metrics) WatchQueue(read func() (QueueState, bool)) {
	m.Registry.MustRegister(&queueCollector{
		waiting: prometheus.NewDesc("switchboard_queue_waiting", "Jobs waiting, per first-choice provider (fleet-wide).", []string{"provider"}, nil),
		leased:  prometheus.NewDesc("switchboard_queue_leased", "Jobs leased to workers (fleet-wide).", nil, nil),
		dlq:     prometheus.NewDesc("switchboard_queue_dlq_size", "Jobs in the dead-letter queue (fleet-wide).", nil, nil),
		read:    read,
	})
}
