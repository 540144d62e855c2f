package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// WorkqueueMetrics exports client-go's workqueue metrics (depth, adds,
// latency, work duration, unfinished work, retries, by queue name) on a
// Prometheus registry, under the names Kubernetes' own controllers use
// (workqueue_*). Pass it to workqueue.SetProvider before any queue is
// made: client-go keeps the provider in a package variable, the one piece
// of global state the operator cannot avoid.
type WorkqueueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, duration          *prometheus.HistogramVec
}

// NewWorkqueueMetrics creates the metrics and registers them with reg.
func NewWorkqueueMetrics(reg prometheus.Registerer) *WorkqueueMetrics {
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12) // 10 ns to about 3 h, as Kubernetes
	m := &WorkqueueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "depth",
			Help: "Current depth of the workqueue."}, []string{"name"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "adds_total",
			Help: "Adds handled by the workqueue."}, []string{"name"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help: "How long an item stays in the workqueue before it is processed.", Buckets: buckets}, []string{"name"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "work_duration_seconds",
			Help: "How long processing an item takes (one sync).", Buckets: buckets}, []string{"name"}),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration; large values mean stuck syncs."}, []string{"name"}),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "Seconds the longest running sync has been running."}, []string{"name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "retries_total",
			Help: "Retries handled by the workqueue."}, []string{"name"}),
	}
	reg.MustRegister(m.depth, m.adds, m.latency, m.duration, m.unfinished, m.longest, m.retries)
	return m
}

var _ workqueue.MetricsProvider = (*WorkqueueMetrics)(nil)

func (m *WorkqueueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(name)
}

func (m *WorkqueueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(name)
}

func (m *WorkqueueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(name)
}

func (m *WorkqueueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return m.duration.WithLabelValues(name)
}

func (m *WorkqueueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name)
}

func (m *WorkqueueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longest.WithLabelValues(name)
}

func (m *WorkqueueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name)
}
