package updates

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of an update, as metric labels.
const (
	outcomeInPlace = "in_place"
	outcomeRolling = "rolling"
	outcomeFailed  = "failed"
)

type metrics struct {
	updates  *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_updates_total",
			Help: "Updates of ObjectStores to the release of their image, by outcome (in_place, rolling, failed).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "objectstore_operator_update_duration_seconds",
			Help:    "Time from the first in-place update call to its outcome.",
			Buckets: []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.updates, m.duration)
	}
	for _, o := range []string{outcomeInPlace, outcomeRolling, outcomeFailed} {
		m.updates.WithLabelValues(o)
		m.duration.WithLabelValues(o) // a dashboard's quantile reads the buckets from the start
	}
	return m
}

func (m *metrics) observe(outcome string, took time.Duration) {
	m.updates.WithLabelValues(outcome).Inc()
	if took > 0 {
		m.duration.WithLabelValues(outcome).Observe(took.Seconds())
	}
}
