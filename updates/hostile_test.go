package updates

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/madmin-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/object-store-operator/operator/internal/testutil"
)

// silentInfo is a tenant's MinIO that accepts the connection and never
// answers ServerInfo (its context ends it: 30 s in sync).
type silentInfo struct {
	*fakeAdmin
	asked *atomic.Int32
}

func (s silentInfo) ServerInfo(ctx context.Context, _ ...func(*madmin.ServerInfoOpts)) (madmin.InfoMessage, error) {
	s.asked.Add(1)
	<-ctx.Done()
	return madmin.InfoMessage{}, ctx.Err()
}

// TestSilentServerInfoHoldsAtMostItsNamespacesShareOfWorkers: every sync
// asks the tenant which release its nodes run (ServerInfo, up to 10 s).
// One tenant with as many ObjectStores as there are update workers, whose
// endpoint accepts and never answers, once held every worker, and another
// namespace's tenant, ready to update, waited for them. Now a namespace
// holds at most OPERATOR_UPDATE_CALLS_PER_NAMESPACE syncs at once; its
// other keys wait for one to end, without a worker.
func TestSilentServerInfoHoldsAtMostItsNamespacesShareOfWorkers(t *testing.T) {
	stores := []*unstructured.Unstructured{tenantStore("hostile", "h0"), tenantStore("hostile", "h1"), tenantStore("good", "tenant")}
	f := newFixture(t, fakeBinaries{}, stores...) // Workers: 2
	var asked atomic.Int32
	dial := f.c.dial
	f.c.dial = func(tn *tenant, host string) (adminAPI, func(), error) {
		if tn.namespace == "hostile" {
			return silentInfo{f.admins[tn.endpoint.Host], &asked}, func() {}, nil
		}
		return dial(tn, host)
	}
	// The healthy tenant becomes ready while the hostile ones are already
	// being looked at (leading queues every cached key).
	good, _, _ := f.stores.GetByKey("good/tenant")
	require.NoError(t, f.stores.Delete(good))
	f.lead(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = f.c.Run(ctx) }()
	require.Eventually(t, func() bool { return asked.Load() == 1 }, 5*time.Second, time.Millisecond, "one hostile sync asks ServerInfo")
	require.NoError(t, f.stores.Add(good))
	f.c.queue.Add("good/tenant")
	require.Eventually(t, func() bool { return f.admin("good", "tenant").realCalls() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the healthy tenant of another namespace is synced at once (its dry run, then its call)")
	assert.Equal(t, int32(1), asked.Load(), "the hostile namespace's second key waits for its first, without a worker")
}

// TestServerInfoOfTinyServersIsRefusedBeforeItIsDecoded: a 200 answer is capped
// at 8 MiB (maxAdminResponse), and the server count (maxNodes, 4096) is
// checked only after madmin decoded it. 8 MiB of "{}," is 2.8 million
// servers of 272 bytes each (unsafe.Sizeof(madmin.ServerProperties{})):
// the decoder builds a slice of about 760 MB, over the chart's 512 Mi
// limit. Every sync of
// the ObjectStore does it, and the next leader syncs the same
// ObjectStore: an OOM loop of the operator for every tenant, from one
// tenant's endpoint (the 16 KiB zstd window of issue 19 by other means).
//
// Before the bound the heap grew by 1.8 to 2.1 GiB (measured 1786 and
// 2157 MiB); now the answer's objects are counted before madmin decodes
// it, and it is refused (AnswerTooLarge) within tens of MiB.
func TestServerInfoOfTinyServersIsRefusedBeforeItIsDecoded(t *testing.T) {
	const size = maxAdminResponse
	body := make([]byte, 0, size+64)
	body = append(body, `{"mode":"online","servers":[`...)
	for len(body)+3 < size-2 {
		body = append(body, "{},"...)
	}
	body = append(body, "{}]}"...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	policy, err := ParseEndpointPolicy("127.0.0.1") // the platform allows this test's endpoint
	require.NoError(t, err)
	tn := &tenant{endpoint: u, user: "minioadmin", password: "minioadmin", namespace: "t", clusterDomain: "cluster.local", policy: policy}
	c := &Controller{}

	grew := testutil.HeapGrowth(func() {
		_, err = c.serverInfo(t.Context(), tn)
	})
	t.Logf("serverInfo: %v", err)
	t.Logf("heap grew by %d MiB for one %d MiB answer", grew>>20, size>>20)
	assert.Less(t, grew, int64(64<<20), "one tenant's ServerInfo answer made the operator's heap grow by %d MiB (chart limit 512 Mi)", grew>>20)
}

// TestUpdateResultsOfTinyNodesAreRefusedBeforeTheyAreDecoded: the same for the
// answer to ServerUpdateV2, decoded before callOnce trims the results to
// maxNodes: 8 MiB of "{}," are 2.8 million ServerPeerUpdateStatus of 72
// bytes. The call runs beside the workers, recovered from panics, but an
// out-of-memory kill is not a panic.
//
// Before the bound: 693 MiB (measured); now refused before decoding.
func TestUpdateResultsOfTinyNodesAreRefusedBeforeTheyAreDecoded(t *testing.T) {
	const size = maxAdminResponse
	body := make([]byte, 0, size+64)
	body = append(body, `{"dryRun":false,"results":[`...)
	for len(body)+3 < size-2 {
		body = append(body, "{},"...)
	}
	body = append(body, "{}]}"...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	policy, err := ParseEndpointPolicy("127.0.0.1")
	require.NoError(t, err)
	tn := &tenant{endpoint: u, user: "minioadmin", password: "minioadmin", namespace: "t", clusterDomain: "cluster.local", policy: policy}
	c := &Controller{cfg: Config{Timeout: time.Minute}, metrics: newMetrics(nil)}

	var r callResult
	grew := testutil.HeapGrowth(func() {
		r = c.callOnce(t.Context(), tn, "http://op/webhook/v1/update/minio.RELEASE.2025-01-01T00-00-00Z.sha256sum", "", "RELEASE.2025-01-01T00-00-00Z", false)
	})
	t.Logf("callOnce: updated %d, err %v", r.updated, r.err)
	t.Logf("heap grew by %d MiB for one %d MiB answer", grew>>20, size>>20)
	assert.Less(t, grew, int64(64<<20), "one tenant's ServerUpdateV2 answer made the operator's heap grow by %d MiB", grew>>20)
}
