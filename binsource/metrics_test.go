package binsource

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/binstore"
)

// Every series a dashboard or alert reads exists from the start, before
// the first pull (a rate over a series that appears late reads nothing),
// and no label carries an image, a registry or a namespace.
func TestPullMetricsAreExposedBeforeTheFirstPullWithBoundedLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := testFetcher(t, binstore.Options{}, FetcherConfig{Registerer: reg, StoreMaxBytes: 3 << 30})
	want := `# HELP objectstore_operator_store_max_bytes Most distinct binary bytes the store may hold; a pull past it is StoreFull.
# TYPE objectstore_operator_store_max_bytes gauge
objectstore_operator_store_max_bytes 3.221225472e+09
`
	require.NoError(t, promtestutil.GatherAndCompare(reg, strings.NewReader(want), "objectstore_operator_store_max_bytes"))
	for _, outcome := range []string{"fetched", "cached", "failed"} {
		assert.Contains(t, gathered(t, reg), `objectstore_operator_pull_duration_seconds_count{outcome="`+outcome+`"} 0`)
	}

	kc, err := newKeychain(nil)
	require.NoError(t, err)
	_, err = f.Ensure(t.Context(), "Not An Image", kc)
	require.Error(t, err)
	assert.Contains(t, gathered(t, reg), `objectstore_operator_pull_duration_seconds_count{outcome="failed"} 1`)
	assert.NotContains(t, gathered(t, reg), "Not An Image")

	unbounded := prometheus.NewRegistry()
	testFetcher(t, binstore.Options{}, FetcherConfig{Registerer: unbounded})
	assert.NotContains(t, gathered(t, unbounded), "objectstore_operator_store_max_bytes", "no bound, no series")
}

// gathered is reg's exposition, as /metrics serves it.
func gathered(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

// Ensure (for tests) makes the release of image available for every platform, after
// resolving the image with kc (the ObjectStore's own credentials), and
// waits for it. It shares the slots of namespace "".
func (f *Fetcher) Ensure(ctx context.Context, image string, kc *keychain) (*Result, error) {
	type result struct {
		res *Result
		err error
	}
	got := make(chan result, 1)
	withdraw := f.Submit(ctx, "", "", image, kc, func(res *Result, err error) { got <- result{res, err} })
	select {
	case r := <-got:
		return r.res, r.err
	case <-ctx.Done():
		withdraw()
		return nil, ctx.Err()
	}
}
