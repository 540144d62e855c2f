package upgradeserver

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the upgrade server's Prometheus metrics.
type Metrics struct {
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	bytesSent prometheus.Counter
	inFlight  prometheus.Gauge
	downloads *prometheus.CounterVec
	rejected  prometheus.Counter
	// rejectedConns counts connections closed at the connection limit.
	rejectedConns prometheus.Counter

	// byRouteCode caches the requests counter's children: resolving label
	// values hashes them on every call.
	byRouteCode sync.Map // routeCode -> prometheus.Counter
	// byRouteClass caches the duration histogram's children the same way.
	byRouteClass sync.Map // routeCode (code is the class, 2 for 2xx) -> prometheus.Observer
}

// durationBuckets span a listing or a sidecar answered from memory (well
// under a millisecond) to a binary of hundreds of MiB sent to a slow
// pod (minutes).
var durationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// codeClasses are the values of the duration histogram's code label: the
// class of the status, so the label has five values whatever a handler
// answers.
var codeClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// duration is the histogram child of route and the class of code.
func (m *Metrics) duration(route string, code int) prometheus.Observer {
	class := code / 100
	if class < 1 || class > len(codeClasses) {
		class = 5 // net/http never writes such a code; count it as a server error
	}
	key := routeCode{route, class}
	if o, ok := m.byRouteClass.Load(key); ok {
		return o.(prometheus.Observer)
	}
	o := m.durations.WithLabelValues(route, codeClasses[class-1])
	m.byRouteClass.Store(key, o)
	return o
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
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "objectstore_operator_upgrade_request_duration_seconds",
			Help:    "Time from a request's headers read to its answer written, by route (list, file, digest, tenant, not_found) and status class (2xx, 3xx, 4xx, 5xx); a download's includes sending the binary.",
			Buckets: durationBuckets,
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
	// Each route's usual answer is a series from the start, so alerts and
	// dashboards read the histogram before the first request.
	for route, code := range map[string]int{routeList: 200, routeFile: 200, routeDigest: 200, routeTenant: 200, routeNone: 404} {
		m.duration(route, code)
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.durations, m.bytesSent, m.inFlight, m.downloads, m.rejected, m.rejectedConns)
	}
	return m
}
