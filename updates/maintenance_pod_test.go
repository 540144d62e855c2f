package updates

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// nodes stands in for a tenant's MinIO nodes, one per pod address: each
// answers the maintenance check as its own drives would have it.
type nodes struct {
	mu      sync.Mutex
	servers map[string]*httptest.Server // pod address -> node
	asked   []string
}

func newNodes(t *testing.T, answers map[string]int) *nodes {
	n := &nodes{servers: map[string]*httptest.Server{}}
	for addr, status := range answers {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
		t.Cleanup(srv.Close)
		n.servers[addr] = srv
	}
	return n
}

func (n *nodes) dial(ctx context.Context, network, address string) (net.Conn, error) {
	n.mu.Lock()
	n.asked = append(n.asked, address)
	srv, ok := n.servers[address]
	n.mu.Unlock()
	if !ok {
		return nil, errors.New("test network: no node at " + address)
	}
	return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
}

// twoPools: a tenant of two pools, minio-pool-0-0 (10.0.0.5) and
// minio-pool-1-0 (10.0.0.6), behind the Service minio and the headless
// Service minio-hl, as MinIO's StatefulSets name them.
func twoPools() []runtime.Object {
	hl := tService("minio-hl", func(s *corev1.Service) {
		s.Spec.ClusterIP = corev1.ClusterIPNone
		s.Spec.Selector = map[string]string{"app": "minio"}
	})
	svc := tService("minio", func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "minio"} })
	labels := map[string]string{"app": "minio"}
	return []runtime.Object{hl, svc, tPod("t", "minio-pool-0-0", "10.0.0.5", labels), tPod("t", "minio-pool-1-0", "10.0.0.6", labels),
		tSlice("minio-hl", "minio-hl-1", 9000, tEndpoint("10.0.0.5", "minio-pool-0-0", "t", "minio-pool-0-0", true),
			tEndpoint("10.0.0.6", "minio-pool-1-0", "t", "minio-pool-1-0", true)),
		tSlice("minio", "minio-1", 9000, tEndpoint("10.0.0.5", "", "t", "minio-pool-0-0", true),
			tEndpoint("10.0.0.6", "", "t", "minio-pool-1-0", true))}
}

// TestTheMaintenanceCheckAsksThePodsOwnNode: MinIO's check answers for
// the node that answers it (it leaves that node's own drives out). Asked
// through the tenant's Service, a node of another pool may answer 200
// while taking the pod down would cost its own pool its quorum. The
// pod's own node is asked.
func TestTheMaintenanceCheckAsksThePodsOwnNode(t *testing.T) {
	c, cs := tenantController(t, "")
	for _, o := range twoPools() {
		require.NoError(t, cs.Tracker().Add(o))
	}
	tn, err := c.loadTenant(t.Context(), storeWithEndpoint("http://minio.t.svc.cluster.local:9000"))
	require.NoError(t, err)
	n := newNodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
	tn.dial = n.dial

	err = tn.mayTakeDown(t.Context(), "minio-pool-1-0", "minio-hl")
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNotNow), "its own node says no: %v", err)
	assert.Contains(t, err.Error(), "minio-pool-1-0.minio-hl.t.svc.cluster.local:9000", "the message names the node asked")
	assert.Equal(t, []string{"10.0.0.6:9000"}, n.asked)

	n.asked = nil
	assert.NoError(t, tn.mayTakeDown(t.Context(), "minio-pool-0-0", "minio-hl"))
	assert.Equal(t, []string{"10.0.0.5:9000"}, n.asked)
}

// TestAPodWithoutItsOwnNameIsAskedThroughTheEndpoint: a StatefulSet
// without a Service name, or an endpoint the platform allowed (not a
// Service of the namespace), gives the pod no name of its own to ask:
// the endpoint is asked, as before.
func TestAPodWithoutItsOwnNameIsAskedThroughTheEndpoint(t *testing.T) {
	c, cs := tenantController(t, "")
	for _, o := range twoPools() {
		require.NoError(t, cs.Tracker().Add(o))
	}
	tn, err := c.loadTenant(t.Context(), storeWithEndpoint("http://minio.t.svc.cluster.local:9000"))
	require.NoError(t, err)
	n := newNodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusOK})
	tn.dial = n.dial
	require.NoError(t, tn.mayTakeDown(t.Context(), "minio-pool-1-0", ""))
	assert.Equal(t, []string{"10.0.0.5:9000"}, n.asked, "the Service's first pod")

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	lb := loopbackTenant(t, srv)
	require.NoError(t, lb.mayTakeDown(t.Context(), "minio-pool-1-0", "minio-hl"), "an allowed address is asked as written")
}

// TestAPodsNodeThatCannotBeAskedFallsBackToTheEndpoint: the pod's own
// name not served (its certificate, say, or no headless Service): the
// endpoint is asked, and the error says why the node was not.
func TestAPodsNodeThatCannotBeAskedFallsBackToTheEndpoint(t *testing.T) {
	c, cs := tenantController(t, "")
	for _, o := range twoPools()[1:] { // no headless Service
		require.NoError(t, cs.Tracker().Add(o))
	}
	tn, err := c.loadTenant(t.Context(), storeWithEndpoint("http://minio.t.svc.cluster.local:9000"))
	require.NoError(t, err)
	n := newNodes(t, map[string]int{"10.0.0.5:9000": http.StatusPreconditionFailed, "10.0.0.6:9000": http.StatusOK})
	tn.dial = n.dial
	err = tn.mayTakeDown(t.Context(), "minio-pool-1-0", "minio-hl")
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNotNow), "the endpoint's answer: %v", err)
	assert.Contains(t, err.Error(), "minio-pool-1-0.minio-hl.t.svc.cluster.local:9000 could not be asked")
	assert.Equal(t, []string{"10.0.0.5:9000"}, n.asked)
}
