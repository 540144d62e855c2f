package upgradeserver

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
)

const durationMetric = "objectstore_operator_upgrade_request_duration_seconds"

// The request-duration histogram is what an SRE graphs: its labels are a
// fixed set (route, status class), so no request can add a series.
func TestRequestDurationsAreCountedByRouteAndStatusClass(t *testing.T) {
	dir := t.TempDir()
	sum := writeRelease(t, dir, "linux-amd64", release, []byte("amd64 binary"))
	reg := prometheus.NewRegistry()
	h := New(Config{Store: newTestStore(t, dir), Metrics: NewMetrics(reg), Log: zerolog.Nop()}).Handler()

	require.Equal(t, http.StatusOK, do(t, h, http.MethodGet, UpdatePath, nil).Code)
	require.Equal(t, http.StatusOK, do(t, h, http.MethodGet, UpdatePath+"/", nil).Code)
	etag := do(t, h, http.MethodGet, UpdatePath, nil).Header().Get("ETag")
	require.Equal(t, http.StatusNotModified, do(t, h, http.MethodGet, UpdatePath, http.Header{"If-None-Match": {etag}}).Code)
	require.Equal(t, http.StatusOK, do(t, h, http.MethodGet, UpdatePath+"/linux-amd64/minio."+release, nil).Code)
	require.Equal(t, http.StatusOK, do(t, h, http.MethodGet, UpdatePath+"/sha256/"+sum+"/minio."+release+".sha256sum", nil).Code)
	require.Equal(t, http.StatusMethodNotAllowed, do(t, h, http.MethodPost, UpdatePath, nil).Code)
	// Every path nothing has is one series, however many clients invent.
	for _, p := range []string{"/nothing", "/webhook/v1/update/a/b/c/d/e", "/" + strings.Repeat("x", 300)} {
		require.Equal(t, http.StatusNotFound, do(t, h, http.MethodGet, p, nil).Code)
	}

	mf := gather(t, reg, durationMetric)
	require.NotNil(t, mf, "%s is exported", durationMetric)
	assert.Equal(t, dto.MetricType_HISTOGRAM, mf.GetType())
	for _, m := range mf.GetMetric() {
		assert.Len(t, m.GetHistogram().GetBucket(), len(durationBuckets))
	}
	assert.Equal(t, map[string]float64{
		"list 2xx":      3,
		"list 3xx":      1,
		"list 4xx":      1,
		"file 2xx":      1,
		"digest 2xx":    1,
		"not_found 4xx": 3,
	}, samples(mf))
}

// The access log is written when the server is given one and absent when
// it is not (OPERATOR_ACCESS_LOG=off), while the metrics still count every
// request.
func TestAccessLogCanBeTurnedOffAlone(t *testing.T) {
	dir := t.TempDir()
	writeRelease(t, dir, "linux-amd64", release, []byte("amd64 binary"))
	store := newTestStore(t, dir)

	var logs, access bytes.Buffer
	log := zerolog.New(&logs)
	accessLog := zerolog.New(&access)
	on := New(Config{Store: store, Log: log, AccessLog: &accessLog}).Handler()
	require.Equal(t, http.StatusOK, do(t, on, http.MethodGet, UpdatePath, nil).Code)
	assert.Contains(t, access.String(), `"message":"request"`)
	assert.Contains(t, access.String(), `"path":"/webhook/v1/update"`)
	assert.Contains(t, access.String(), `"status":200`)
	assert.Equal(t, 1, strings.Count(access.String(), `"time":"`), "the server stamps the line, once")

	reg := prometheus.NewRegistry()
	off := New(Config{Store: store, Metrics: NewMetrics(reg), Log: log}).Handler()
	require.Equal(t, http.StatusOK, do(t, off, http.MethodGet, UpdatePath, nil).Code)
	require.Equal(t, http.StatusNotFound, do(t, off, http.MethodGet, "/nothing", nil).Code)
	assert.NotContains(t, logs.String(), `"message":"request"`, "no access line in the operator's log either")
	assert.Equal(t, map[string]float64{"list 200": 1, "not_found 404": 1}, samples(gather(t, reg, "objectstore_operator_upgrade_requests_total")))
	assert.Equal(t, map[string]float64{"list 2xx": 1, "not_found 4xx": 1}, samples(gather(t, reg, durationMetric)))
}

func gather(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// samples maps "<route> <code>" to a counter's value or a histogram's
// sample count.
func samples(mf *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mf.GetMetric() {
		var route, code string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "route":
				route = l.GetValue()
			case "code":
				code = l.GetValue()
			}
		}
		v := m.GetCounter().GetValue()
		if h := m.GetHistogram(); h != nil {
			v = float64(h.GetSampleCount())
		}
		if v == 0 {
			continue // a series made up front, not used yet
		}
		out[route+" "+code] = v
	}
	return out
}

// Alerts and dashboards read the duration histogram before any request:
// each route's usual answer is a series from the start.
func TestEveryRouteHasADurationSeriesBeforeTheFirstRequest(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	var series []string
	for _, m := range gather(t, reg, durationMetric).GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetValue())
		}
		series = append(series, strings.Join(labels, " "))
	}
	assert.ElementsMatch(t, []string{"2xx list", "2xx file", "2xx digest", "2xx tenant", "4xx not_found"}, series)
}

// TestADownloadSeriesGoesWithItsBinary: a tenant names releases for free
// (a new name for stored bytes is a hard link), so a series a binary
// would keep forever is one it could multiply at will. The series of a
// binary no longer in the store is dropped at the next download.
func TestADownloadSeriesGoesWithItsBinary(t *testing.T) {
	dir := t.TempDir()
	const gone, kept = "RELEASE.2025-04-08T15-41-24Z", "RELEASE.2025-04-09T15-41-24Z"
	writeRelease(t, dir, "", gone, []byte("old binary"))
	writeRelease(t, dir, "", kept, []byte("new binary"))
	store := newTestStore(t, dir)
	reg := prometheus.NewRegistry()
	h := New(Config{Store: store, Log: zerolog.Nop(), Metrics: NewMetrics(reg)}).Handler()
	require.Equal(t, http.StatusOK, do(t, h, http.MethodGet, UpdatePath+"/minio."+gone, nil).Code)
	series := func() []string {
		var out []string
		for _, m := range gather(t, reg, "objectstore_operator_upgrade_downloads_total").GetMetric() {
			out = append(out, m.GetLabel()[0].GetValue())
		}
		return out
	}
	assert.Equal(t, []string{"minio." + gone}, series())

	for _, suffix := range []string{"", binstore.SHA256SumSuffix, binstore.MinisigSuffix} {
		require.NoError(t, os.Remove(filepath.Join(dir, "minio."+gone+suffix)))
	}
	store.Scan()
	require.Equal(t, http.StatusNotFound, do(t, h, http.MethodGet, UpdatePath+"/minio."+gone, nil).Code)
	require.Equal(t, http.StatusOK, do(t, h, http.MethodGet, UpdatePath+"/minio."+kept, nil).Code)
	assert.Equal(t, []string{"minio." + kept}, series(), "the removed binary's series is gone")
}
