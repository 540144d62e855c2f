package upgradeserver

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the upgrade server's Prometheus metrics.
type Metrics struct {
	requests  *prometheus.CounterVec
	bytesSent prometheus.Counter
	inFlight  prometheus.Gauge
	downloads *prometheus.CounterVec
	rejected  prometheus.Counter
	// rejectedConns counts connections closed at the connection limit.
	rejectedConns prometheus.Counter

	// byRouteCode caches the requests counter's children: resolving label
	// values hashes them on every call.
	byRouteCode sync.Map // routeCode -> prometheus.Counter
}

type routeCode struct {
	route string
	code  int
}

func (m *Metrics) request(route string, code int) prometheus.Counter {
	key := routeCode{route, code}
	if c, ok := m.byRouteCode.Load(key); ok {
		return c.(prometheus.Counter)
	}
	c := m.requests.WithLabelValues(route, strconv.Itoa(code))
	m.byRouteCode.Store(key, c)
	return c
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_upgrade_requests_total",
			Help: "Requests to the upgrade server by route and HTTP status code.",
		}, []string{"route", "code"}),
		bytesSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_upgrade_sent_bytes_total",
			Help: "Response body bytes sent by the upgrade server.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "objectstore_operator_upgrade_downloads_in_flight",
			Help: "Binary downloads currently being sent.",
		}),
		rejectedConns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_upgrade_connections_rejected_total",
			Help: "Connections closed on accept because the connection limit was reached.",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_upgrade_downloads_rejected_total",
			Help: "Binary downloads answered 503 because the concurrent-download limit was reached.",
		}),
		downloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_upgrade_downloads_total",
			Help: "Binary downloads started (GET of a binary, including ranges), by binary path.",
		}, []string{"binary"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.bytesSent, m.inFlight, m.downloads, m.rejected, m.rejectedConns)
	}
	return m
}
