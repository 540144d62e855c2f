package updates

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/object-store-operator/operator/internal/reason"
)

// The maintenance check is what MinIO offers orchestrators: 200 lets one
// more node go, 412 says quorum would be lost, and an endpoint that does
// not answer is told apart from a MinIO that says no.
func TestTheMaintenanceCheckReadsMinIOsAnswer(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   string
	}{
		{http.StatusOK, ""},
		{http.StatusPreconditionFailed, "412 from /minio/health/cluster?maintenance=true: taking a node down now would lose quorum"},
		{http.StatusServiceUnavailable, "did not answer 200; the cluster is not healthy now"},
	} {
		var asked string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked = r.URL.String()
			w.WriteHeader(tc.status)
		}))
		tn := loopbackTenant(t, srv)
		err := tn.maintenance(t.Context(), "")
		srv.Close()
		assert.Equal(t, "/minio/health/cluster?maintenance=true", asked)
		if tc.want == "" {
			assert.NoError(t, err)
			continue
		}
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrNotNow), "%d: wait, not go ahead", tc.status)
		assert.Contains(t, err.Error(), tc.want)
	}

	srv := httptest.NewServer(http.NotFoundHandler())
	tn := loopbackTenant(t, srv)
	srv.Close()
	err := tn.maintenance(t.Context(), "")
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrNotNow), "a MinIO that cannot be asked did not say no")
	assert.Equal(t, CauseTenantUnreachable, reason.Of(err))
}
