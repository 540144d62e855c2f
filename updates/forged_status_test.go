package updates

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/minio/madmin-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// urlRecorder wraps a fixture admin and remembers the URLs MinIO was told
// to fetch from.
type urlRecorder struct {
	*fakeAdmin
	mu   sync.Mutex
	urls []string
}

func (r *urlRecorder) ServerUpdateV2(ctx context.Context, o madmin.ServerUpdateOpts) (madmin.ServerUpdateStatusV2, error) {
	r.mu.Lock()
	r.urls = append(r.urls, o.UpdateURL)
	r.mu.Unlock()
	return r.fakeAdmin.ServerUpdateV2(ctx, o)
}

// TestAStatusBinaryURLNotWrittenByTheOperatorIsNeverGivenToMinIO: a
// tenant allowed to write objectstores/status (its own RBAC verb; a
// namespace admin given "aistor.min.io/*" has it) writes status.binary
// with a URL of its choice. MinIO is never told to fetch from anywhere but
// the operator's own upgrade server, whatever the status says.
func TestAStatusBinaryURLNotWrittenByTheOperatorIsNeverGivenToMinIO(t *testing.T) {
	forged := "http://attacker.example:8080/anything/minio." + relNew + ".sha256sum"
	s := tenantStore("t", "tenant")
	st := binaryAvailable()
	st["binary"].(map[string]any)["url"] = forged
	s.Object["status"] = st
	f := newFixture(t, fakeBinaries{}, s)
	rec := &urlRecorder{fakeAdmin: f.admin("t", "tenant")}
	f.c.dial = func(tn *tenant, host string) (adminAPI, func(), error) { return rec, func() {}, nil }
	f.lead(t)
	require.NoError(t, f.c.sync(t.Context(), "t/tenant"))
	f.waitCallDone(t, "t/tenant")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, u := range rec.urls {
		assert.False(t, strings.HasPrefix(u, "http://attacker.example"),
			"MinIO was told to fetch its new binary from the tenant-written status.binary.url %s", u)
	}
}
