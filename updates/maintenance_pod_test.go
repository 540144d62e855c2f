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
	"k8s.io/client-go/kubernetes/fake"

	"github.com/object-store-operator/operator/internal/reason"
)

// minioNodes stands in for a tenant's MinIO nodes, one per pod address:
// each answers the maintenance check as its own drives would have it.
type minioNodes struct {
	mu      sync.Mutex
	servers map[string]*httptest.Server // pod address -> node
	asked   []string
}

func newMinIONodes(t *testing.T, answers map[string]int) *minioNodes {
	n := &minioNodes{servers: map[string]*httptest.Server{}}
	for addr, status := range answers {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
		t.Cleanup(srv.Close)
		n.servers[addr] = srv
	}
	return n
}

func (n *minioNodes) dial(ctx context.Context, network, address string) (net.Conn, error) {
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
// minio-pool-1-0 (10.0.0.6), behind the Service minio, whose port 80
// leads to the pods' 9000 as MinIO operators' Services do.
func twoPools(pods ...string) []runtime.Object {
	svc := tService("minio", func(s *corev1.Service) {
		s.Spec.Selector = map[string]string{"app": "minio"}
		s.Spec.Ports = []corev1.ServicePort{{Name: "http-minio", Port: 80}}
	})
	slice := tSlice("minio", "minio-1", 9000)
	name := "http-minio"
	slice.Ports[0].Name = &name
	ips := map[string]string{"minio-pool-0-0": "10.0.0.5", "minio-pool-1-0": "10.0.0.6"}
	for _, p := range pods {
		slice.Endpoints = append(slice.Endpoints, tEndpoint(ips[p], "", "t", p, true))
	}
	return []runtime.Object{svc,
		tPod("t", "minio-pool-0-0", "10.0.0.5", map[string]string{"app": "minio", "pool": "0"}),
		tPod("t", "minio-pool-1-0", "10.0.0.6", map[string]string{"app": "minio", "pool": "1"}), slice}
}

func twoPoolTenant(t *testing.T, n *minioNodes, objs ...runtime.Object) *tenant {
	t.Helper()
	tn, _ := tenantAt(t, n, "http://minio.t.svc.cluster.local", objs...)
	return tn
}

// tenantAt is a tenant whose endpoint is endpoint, of a cluster of objs,
// that reaches n's nodes; the clientset takes reactors.
func tenantAt(t *testing.T, n *minioNodes, endpoint string, objs ...runtime.Object) (*tenant, *fake.Clientset) {
	t.Helper()
	c, cs := tenantController(t, "")
	for _, o := range objs {
		require.NoError(t, cs.Tracker().Add(o))
	}
	tn, err := c.loadTenant(t.Context(), storeWithEndpoint(endpoint))
	require.NoError(t, err)
	tn.dial = n.dial
	return tn, cs
}

// TestTheMaintenanceCheckAsksThePodsOwnNode: MinIO's check answers for
// the node that answers it (it leaves that node's own drives out).
// Through the tenant's Service a node of another pool may answer 200
// while taking the pod down would cost its own pool its quorum. The
// pod's own endpoint of the Service is asked, at the port the Service
// leads to.
func TestTheMaintenanceCheckAsksThePodsOwnNode(t *testing.T) {
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
	tn := twoPoolTenant(t, n, twoPools("minio-pool-0-0", "minio-pool-1-0")...)

	asked, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNotNow), "its own node says no: %v", err)
	assert.Contains(t, err.Error(), "412 from /minio/health/cluster?maintenance=true (pod minio-pool-1-0's node)")
	assert.Empty(t, asked)
	assert.Equal(t, []string{"10.0.0.6:9000"}, n.asked, "only the pod's own node, at the port the Service leads to")

	n.asked = nil
	_, err = tn.mayTakeDown(t.Context(), "minio-pool-0-0")
	assert.NoError(t, err)
	assert.Equal(t, []string{"10.0.0.5:9000"}, n.asked)
}

// TestAPodTheServiceDoesNotLeadToIsAskedAboutThroughTheService: a
// Service of one pool does not lead to the other pool's pods; the check
// for one of them is asked of the Service as a whole, and the rollout is
// told so.
func TestAPodTheServiceDoesNotLeadToIsAskedAboutThroughTheService(t *testing.T) {
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK, "10.0.0.6:9000": http.StatusPreconditionFailed})
	objs := twoPools("minio-pool-0-0")
	objs[0].(*corev1.Service).Spec.Selector["pool"] = "0"
	tn := twoPoolTenant(t, n, objs...)
	asked, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	require.NoError(t, err)
	assert.Contains(t, asked, "asked through http://minio.t.svc.cluster.local as a whole: Service t/minio has no endpoint of Pod minio-pool-1-0")
	assert.Equal(t, []string{"10.0.0.5:9000"}, n.asked)
}

// TestANodeThatDoesNotAnswerIsNotAskedAboutElsewhere: the pod's own
// endpoint does not answer; no other node is asked in its stead (its
// answer would be about another node), and the rollout hears that MinIO
// could not be asked.
func TestANodeThatDoesNotAnswerIsNotAskedAboutElsewhere(t *testing.T) {
	n := newMinIONodes(t, map[string]int{"10.0.0.5:9000": http.StatusOK})
	tn := twoPoolTenant(t, n, twoPools("minio-pool-0-0", "minio-pool-1-0")...)
	_, err := tn.mayTakeDown(t.Context(), "minio-pool-1-0")
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrNotNow))
	assert.Equal(t, CauseTenantUnreachable, reason.Of(err))
	assert.Equal(t, []string{"10.0.0.6:9000"}, n.asked, "no other node")
}
