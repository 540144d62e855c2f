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
	// outcomeDryRunFailed: the dry run did not pass on every node; no
	// real call was made, nothing rolled.
	outcomeDryRunFailed = "dry_run_failed"
	// outcomeStopped: the update failed and the fallback is None.
	outcomeStopped = "stopped"
)

// Kinds of update calls, as metric labels.
const (
	kindDryRun = "dry_run"
	kindUpdate = "update"
)

type metrics struct {
	updates  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	calls    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_updates_total",
			Help: "Updates of ObjectStores to the release of their image, by outcome (in_place, rolling, failed, dry_run_failed, stopped).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "objectstore_operator_update_duration_seconds",
			Help:    "Time from the first in-place update call to its outcome.",
			Buckets: []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800},
		}, []string{"outcome"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_update_calls_total",
			Help: "ServerUpdateV2 calls made to tenants' MinIO, by kind: dry_run (every node fetches and verifies the binary, nothing restarts) or update.",
		}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.updates, m.duration, m.calls)
	}
	m.calls.WithLabelValues(kindDryRun)
	m.calls.WithLabelValues(kindUpdate)
	for _, o := range []string{outcomeInPlace, outcomeRolling, outcomeFailed, outcomeDryRunFailed, outcomeStopped} {
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
