package health

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
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
