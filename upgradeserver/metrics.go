package upgradeserver

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/object-store-operator/operator/binstore"
)

// Metrics are the upgrade server's Prometheus metrics.
type Metrics struct {
	// requests counts every request: by route and status, its duration
	// and its bytes.
	requests  *requestMetrics
	inFlight  prometheus.Gauge
	downloads *prometheus.CounterVec
	// series are the binary labels downloads has, for the snapshot
	// pruned last: a series lives as long as its binary is in the store
	// (a tenant names releases for free).
	seriesMu sync.Mutex
	series   map[string]struct{}
	pruned   *binstore.Snapshot
	rejected prometheus.Counter
	// rejectedConns counts connections closed at the connection limit.
	rejectedConns prometheus.Counter
}

// durationBuckets span a listing or a sidecar answered from memory (well
// under a millisecond) to a binary of hundreds of MiB sent to a slow
// pod (minutes).
var durationBuckets = [...]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// codeClasses are the values of the duration histogram's code label: the
// class of the status, so the label has five values whatever a handler
// answers.
var codeClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		series:   map[string]struct{}{},
		requests: newRequestMetrics(),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "objectstore_operator_upgrade_downloads_in_flight",
			Help: "Binary downloads currently being sent.",
		}),
		rejectedConns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_upgrade_connections_rejected_total",
			Help: "Connections closed on accept because the connection limit, or the client's share of it, was reached.",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_upgrade_downloads_rejected_total",
			Help: "Binary downloads refused because the concurrent-download limit, or the client's share of it, was reached.",
		}),
		downloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_upgrade_downloads_total",
			Help: "Binary downloads started (GET of a binary, including ranges), by binary path.",
		}, []string{"binary"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.inFlight, m.downloads, m.rejected, m.rejectedConns)
	}
	return m
}

// countDownload counts a download of b, first dropping the series of
// binaries snap no longer holds if snap is new to the metrics.
func (m *Metrics) countDownload(snap *binstore.Snapshot, b *binstore.Binary) {
	label := b.PlainPath()
	m.seriesMu.Lock()
	if snap != m.pruned {
		m.pruned = snap
		stored := make(map[string]bool, len(snap.All()))
		for _, s := range snap.All() {
			stored[s.PlainPath()] = true
		}
		for l := range m.series {
			if !stored[l] {
				m.downloads.DeleteLabelValues(l)
				delete(m.series, l)
			}
		}
	}
	m.series[label] = struct{}{}
	m.seriesMu.Unlock()
	m.downloads.WithLabelValues(label).Inc()
}
