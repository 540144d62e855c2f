package autocert

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the serving certificate's Prometheus metrics. The expiry and
// source are read from the Current they were given to when scraped.
type Metrics struct {
	served      atomic.Pointer[Current]
	expiry      *prometheus.Desc
	source      *prometheus.Desc
	reloads     prometheus.Counter
	rejected    *prometheus.CounterVec
	csrOutcomes *prometheus.CounterVec
	foreign     *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		expiry: prometheus.NewDesc("objectstore_operator_serving_certificate_expiry_timestamp_seconds",
			"NotAfter of the served certificate, as a Unix timestamp.", nil, nil),
		source: prometheus.NewDesc("objectstore_operator_serving_certificate_source",
			"1 for the source of the served certificate (autocert, custom certificate, certificate files).", []string{"source"}, nil),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_serving_certificate_reloads_total",
			Help: "Times a new serving certificate was swapped in.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_serving_certificate_rejected_total",
			Help: "Candidate certificates rejected, by reason (missing, garbage, key_mismatch, expired, not_yet_valid, sans, deleted, foreign, weak_key, key_usage, other).",
		}, []string{"reason"}),
		csrOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_csr_total",
			Help: "CertificateSigningRequests filed by autocert, by outcome (issued, denied, failed, timeout, error).",
		}, []string{"outcome"}),
		foreign: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "objectstore_operator_autocert_foreign_secret",
			Help: "1 while autocert leaves its Secret alone because another issuer wrote it, by reason " +
				"(cert_manager, unlabelled, certificate_changed); reported by the leader.",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(servedCollector{m}, m.reloads, m.rejected, m.csrOutcomes, m.foreign)
	}
	return m
}

// servedCollector reports the certificate being served, if any.
type servedCollector struct{ m *Metrics }

func (c servedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.expiry
	ch <- c.m.source
}

func (c servedCollector) Collect(ch chan<- prometheus.Metric) {
	cur := c.m.served.Load()
	if cur == nil {
		return
	}
	s := cur.cur.Load()
	if s == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.m.expiry, prometheus.GaugeValue, float64(s.cert.Leaf.NotAfter.Unix()))
	ch <- prometheus.MustNewConstMetric(c.m.source, prometheus.GaugeValue, 1, s.kind)
}
