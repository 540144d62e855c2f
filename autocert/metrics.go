package autocert

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the serving certificate's Prometheus metrics.
type Metrics struct {
	expiry      prometheus.Gauge
	source      *prometheus.GaugeVec
	reloads     prometheus.Counter
	rejected    *prometheus.CounterVec
	csrOutcomes *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		expiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "objectstore_operator_serving_certificate_expiry_timestamp_seconds",
			Help: "NotAfter of the served certificate, as a Unix timestamp.",
		}),
		source: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "objectstore_operator_serving_certificate_source",
			Help: "1 for the source of the served certificate (autocert, custom certificate, certificate files).",
		}, []string{"source"}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "objectstore_operator_serving_certificate_reloads_total",
			Help: "Times a new serving certificate was swapped in.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_serving_certificate_rejected_total",
			Help: "Candidate certificates rejected, by reason (missing, garbage, key_mismatch, expired, not_yet_valid, sans, deleted, other).",
		}, []string{"reason"}),
		csrOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "objectstore_operator_csr_total",
			Help: "CertificateSigningRequests filed by autocert, by outcome (issued, denied, failed, timeout, error).",
		}, []string{"outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.expiry, m.source, m.reloads, m.rejected, m.csrOutcomes)
	}
	return m
}
