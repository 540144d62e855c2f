package health

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProbes(t *testing.T) {
	var certReady error = errors.New("no serving certificate loaded yet")
	checks := &Checks{}
	checks.Add("serving-certificate", func() error { return certReady })
	checks.Add("update-store", func() error { return nil })
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "probe_test_total", Help: "x"}))
	h := Handler(checks, reg)

	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	assert.Equal(t, http.StatusOK, get("/healthz").Code, "alive even when not ready")
	notReady := get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, notReady.Code)
	assert.Contains(t, notReady.Body.String(), "serving-certificate: no serving certificate loaded yet")
	assert.NotContains(t, notReady.Body.String(), "update-store")

	certReady = nil
	assert.Equal(t, http.StatusOK, get("/readyz").Code)
	assert.Contains(t, get("/metrics").Body.String(), "probe_test_total 0")
}

// Each readiness check is a series, 1 while it passes: an alert sees a
// replica that runs but is not ready (its Service no longer routes to it)
// and which check holds it back.
func TestEveryReadinessCheckIsASeries(t *testing.T) {
	var certReady error = errors.New("no serving certificate loaded yet")
	checks := &Checks{}
	checks.Add("serving-certificate", func() error { return certReady })
	checks.Add("binary-store", func() error { return nil })
	want := `# HELP objectstore_operator_ready 1 while the replica's readiness check passes, else 0 (/readyz fails while any is 0).
# TYPE objectstore_operator_ready gauge
objectstore_operator_ready{check="binary-store"} 1
objectstore_operator_ready{check="serving-certificate"} 0
`
	require.NoError(t, testutil.CollectAndCompare(checks.Collector(), strings.NewReader(want)))
	certReady = nil
	require.NoError(t, testutil.CollectAndCompare(checks.Collector(), strings.NewReader(strings.ReplaceAll(want, "} 0", "} 1"))))
}
