package upgradeserver

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// route is where the router sent a request: a small index, so counting a
// request hashes no label.
type route uint8

const (
	routeList route = iota
	routeFile
	// routeDigest serves a binary by its bytes: sha256/<hex>/minio.<RELEASE>.
	routeDigest
	// routeTenant serves a binary published for one ObjectStore:
	// sha256/<hex>/<component>/minio.<RELEASE>.
	routeTenant
	routeNone
	routeCount
)

// routeNames are the values of the route label, and the router's route
// names.
var routeNames = [routeCount]string{"list", "file", "digest", "tenant", "not_found"}

// usualClass is each route's usual status class (1 is 2xx): its duration
// series exists from the start, so alerts and dashboards read it before
// the first request.
var usualClass = [routeCount]int{1, 1, 1, 1, 3}

func routeNamed(name string) route {
	for i, n := range routeNames {
		if n == name {
			return route(i)
		}
	}
	return routeNone
}

// knownCodes are the statuses the handlers answer; each has a counter in
// every stripe. Any other (none today) is counted under a lock.
var knownCodes = [...]int{200, 206, 304, 400, 404, 405, 412, 416, 500, 503}

func codeIndex(code int) int {
	for i, c := range knownCodes {
		if c == code {
			return i
		}
	}
	return -1
}

// stripeCount stripes: requests on different connections count in
// different stripes, so cores serving them at once do not all write the
// same memory. One shared set of counters made every request wait for the
// others' writes: on two cores the handler served no more than on one.
const stripeCount = 16

// stripe holds one share of the counts. The padding keeps two stripes'
// hottest counters off one cache line.
type stripe struct {
	_        [64]byte
	requests [routeCount][len(knownCodes)]atomic.Uint64
	// buckets counts durations by route, status class and bucket (the last
	// is +Inf); sumNanos is their sum.
	buckets  [routeCount][len(codeClasses)][len(durationBuckets) + 1]atomic.Uint64
	sumNanos [routeCount][len(codeClasses)]atomic.Uint64
	bytes    atomic.Uint64
}

// requestMetrics is a prometheus.Collector of the per-request metrics:
// objectstore_operator_upgrade_requests_total, _request_duration_seconds
// and _sent_bytes_total, summed over the stripes when scraped.
type requestMetrics struct {
	requestsDesc, durationDesc, bytesDesc *prometheus.Desc

	stripes [stripeCount]stripe
	// next hands stripes to connections in turn.
	next atomic.Uint32

	mu    sync.Mutex
	other map[routeCode]uint64 // statuses not in knownCodes
}

type routeCode struct {
	route route
	code  int
}

func newRequestMetrics() *requestMetrics {
	return &requestMetrics{
		requestsDesc: prometheus.NewDesc("objectstore_operator_upgrade_requests_total",
			"Requests to the upgrade server by route and HTTP status code.", []string{"route", "code"}, nil),
		durationDesc: prometheus.NewDesc("objectstore_operator_upgrade_request_duration_seconds",
			"Time from a request's headers read to its answer written, by route (list, file, digest, tenant, not_found) and status class (2xx, 3xx, 4xx, 5xx); a download's includes sending the binary.",
			[]string{"route", "code"}, nil),
		bytesDesc: prometheus.NewDesc("objectstore_operator_upgrade_sent_bytes_total",
			"Response body bytes sent by the upgrade server.", nil, nil),
		other: map[routeCode]uint64{},
	}
}

type stripeKey struct{}

// connContext gives each new connection the next stripe; every request on
// it counts there.
func (m *requestMetrics) connContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, stripeKey{}, m.next.Add(1)%stripeCount)
}

// observe counts one answered request.
func (m *requestMetrics) observe(r *http.Request, rt route, code int, took time.Duration, bytes int64) {
	i, _ := r.Context().Value(stripeKey{}).(uint32) // a handler used alone: stripe 0
	s := &m.stripes[i%stripeCount]
	if c := codeIndex(code); c >= 0 {
		s.requests[rt][c].Add(1)
	} else {
		m.mu.Lock()
		m.other[routeCode{rt, code}]++
		m.mu.Unlock()
	}
	class := codeClass(code)
	secs := took.Seconds()
	b := len(durationBuckets)
	for j, upper := range durationBuckets {
		if secs <= upper {
			b = j
			break
		}
	}
	s.buckets[rt][class][b].Add(1)
	s.sumNanos[rt][class].Add(uint64(max(took, 0)))
	if bytes > 0 {
		s.bytes.Add(uint64(bytes))
	}
}

// codeClass is the index into codeClasses of code's class.
func codeClass(code int) int {
	class := code / 100
	if class < 1 || class > len(codeClasses) {
		class = 5 // net/http never writes such a code; count it as a server error
	}
	return class - 1
}

func (m *requestMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.requestsDesc
	ch <- m.durationDesc
	ch <- m.bytesDesc
}

func (m *requestMetrics) Collect(ch chan<- prometheus.Metric) {
	var requests [routeCount][len(knownCodes)]uint64
	var buckets [routeCount][len(codeClasses)][len(durationBuckets) + 1]uint64
	var sums [routeCount][len(codeClasses)]uint64
	var bytes uint64
	for i := range m.stripes {
		s := &m.stripes[i]
		for rt := range routeCount {
			for c := range knownCodes {
				requests[rt][c] += s.requests[rt][c].Load()
			}
			for cl := range codeClasses {
				for b := range buckets[rt][cl] {
					buckets[rt][cl][b] += s.buckets[rt][cl][b].Load()
				}
				sums[rt][cl] += s.sumNanos[rt][cl].Load()
			}
		}
		bytes += s.bytes.Load()
	}
	for rt := range routeCount {
		for c, code := range knownCodes {
			if n := requests[rt][c]; n > 0 {
				ch <- prometheus.MustNewConstMetric(m.requestsDesc, prometheus.CounterValue, float64(n), routeNames[rt], strconv.Itoa(code))
			}
		}
		for cl := range codeClasses {
			var count uint64
			cumulative := make(map[float64]uint64, len(durationBuckets))
			for b, upper := range durationBuckets {
				count += buckets[rt][cl][b]
				cumulative[upper] = count
			}
			count += buckets[rt][cl][len(durationBuckets)]
			if count == 0 && cl != usualClass[rt] {
				continue
			}
			ch <- prometheus.MustNewConstHistogram(m.durationDesc, count, float64(sums[rt][cl])/1e9, cumulative, routeNames[rt], codeClasses[cl])
		}
	}
	m.mu.Lock()
	for k, n := range m.other {
		ch <- prometheus.MustNewConstMetric(m.requestsDesc, prometheus.CounterValue, float64(n), routeNames[k.route], strconv.Itoa(k.code))
	}
	m.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(m.bytesDesc, prometheus.CounterValue, float64(bytes))
}
